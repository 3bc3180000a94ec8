# kstack(1000): deeper than perf_event_max_stack
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      by = [kstack(1000)] # ERROR: Expected a number
    }
  }
}
