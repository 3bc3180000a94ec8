# duplicate address
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {}
  }
}

probe "tracepoint" "t" { # ERROR: Duplicate probe address
  event = "syscalls:sys_enter_write"
  on_entry {
    count "c" {}
  }
}
