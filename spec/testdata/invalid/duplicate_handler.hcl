# duplicate handler
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "a" {}
  }
  on_entry { # ERROR: Duplicate handler
    count "b" {}
  }
}
