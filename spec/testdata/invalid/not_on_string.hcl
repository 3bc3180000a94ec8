# not on string
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    when = !comm # ERROR: ! needs a bool
    count "c" {}
  }
}
