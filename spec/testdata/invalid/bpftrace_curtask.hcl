# bpftrace's curtask is task here, and a chain of -> one error
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "a" { by = [curtask] } # ERROR: Unknown name
    count "b" { by = [curtask.real_parent.tgid] } # ERROR: Unknown name
  }
}
