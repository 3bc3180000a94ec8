# and needs bools
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    when = pid == 1 && tid # ERROR: && needs bools
    count "c" {}
  }
}
