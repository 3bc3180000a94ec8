# a file with -> still has its other mistakes reported
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "a" { by = [curtask->comm] } # ERROR: Use . for fields
    count "b" {
      when = comm > 3 # ERROR: > needs integers
    }
  }
}
probe "tracepoint" "u" {
  event = "syscalls:sys_enter_read"
  on_entry {
    sum "c" { value = nsecs } # ERROR: Unknown name
  }
}
