# pidpersec: new processes per second (forks).
#
# A port of bpftrace's tools/pidpersec.bt: one count on the
# sched:sched_process_fork tracepoint. `probectl run -interval 1s
# pidpersec.hcl` prints what each second added, as pidpersec.bt's
# print(@); clear(@) does.

probe "tracepoint" "fork" {
  event = "sched:sched_process_fork"

  on_entry {
    count "pids" {}
  }
}
