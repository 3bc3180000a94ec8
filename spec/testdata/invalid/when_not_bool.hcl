# when not bool
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    when = pid # ERROR: Condition is not a bool
    count "c" {}
  }
}
