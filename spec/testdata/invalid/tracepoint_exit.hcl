# tracepoint exit
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_exit { # ERROR: Tracepoints have no exit
    count "c" {}
  }
}
