# handler does nothing
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry { # ERROR: Handler does nothing
    when = pid == 1
  }
}
