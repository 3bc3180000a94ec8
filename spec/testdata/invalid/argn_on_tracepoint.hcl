# argn on tracepoint
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    sum "s" {
      value = arg2 # ERROR: argN is not for tracepoints
    }
  }
}
