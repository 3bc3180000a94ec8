# TARGET: linux-7.2-amd64
# attach = "raw_tracepoint" insists on a raw tracepoint, which passes the
# TP_PROTO parameters, not the format's fields; a system call's event is a
# filter on the raw tracepoint of every system call.
probe "tracepoint" "switches" {
  event  = "sched:sched_switch"
  attach = "raw_tracepoint" # ERROR: Raw tracepoint does not fit
  on_entry {
    count "c" { by = [args.next_pid] }
  }
}

probe "tracepoint" "opens" {
  event  = "syscalls:sys_enter_openat"
  attach = "raw_tracepoint" # ERROR: Raw tracepoint does not fit
  on_entry {
    count "c" {}
  }
}

probe "tracepoint" "which" {
  event  = ["sched:sched_switch", "sched:sched_wakeup"]
  attach = "raw_tracepoint" # ERROR: Raw tracepoint does not fit
  on_entry {
    count "c" { by = [event] }
  }
}
