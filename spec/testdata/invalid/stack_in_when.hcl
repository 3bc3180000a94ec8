# kstack in a when
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    when = kstack # ERROR: Stack used as a value
    count "c" {}
  }
}
