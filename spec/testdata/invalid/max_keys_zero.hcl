# max keys zero
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      max_keys = 0 # ERROR: Number out of range
    }
  }
}
