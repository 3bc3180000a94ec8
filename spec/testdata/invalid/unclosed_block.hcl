# unclosed block
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {}
  }

probe "tracepoint" "u" { # ERROR: Unclosed configuration block
