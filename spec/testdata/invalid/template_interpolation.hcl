# template interpolation
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    when = comm == "${pid}" # ERROR: Templates are not supported
    count "c" {}
  }
}
