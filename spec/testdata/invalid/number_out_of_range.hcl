# whole numbers beyond 64 bits are out of range, not "not whole"
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    sum "big" {
      value = 9223372036854775808 # ERROR: Number out of range
    }
    sum "small" {
      value = -9223372036854775809 # ERROR: Number out of range
    }
    sum "huge" {
      value = 1e30 # ERROR: Number out of range
    }
    sum "least" {
      value = -9223372036854775808
    }
  }
}
