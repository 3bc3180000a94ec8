# bpftrace's probe type does not go in event
probe "tracepoint" "t" {
  event = "tracepoint:syscalls:sys_enter_kill" # ERROR: Probe type in the event
  on_entry {
    count "c" {}
  }
}
