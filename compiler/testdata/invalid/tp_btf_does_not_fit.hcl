# TARGET: linux-7.2-amd64
# attach = "tp_btf" loads one program for one event, against its
# btf_trace_NAME: a system call's event has none, several events are
# several programs, and a profile's BTF is not known until apply.
probe "tracepoint" "opens" {
  event  = "syscalls:sys_enter_openat"
  attach = "tp_btf" # ERROR: tp_btf does not fit
  on_entry {
    count "c" {}
  }
}

probe "tracepoint" "two" {
  event  = ["sched:sched_switch", "sched:sched_wakeup"]
  attach = "tp_btf" # ERROR: tp_btf does not fit
  on_entry {
    count "c" {}
  }
}

probe "tracepoint" "typed" {
  event  = "sched:sched_switch"
  attach = "tp_btf" # ERROR: tp_btf does not fit
  on_entry {
    count "c" { by = [args.prev_pid] }
  }
}
