# runqlat: CPU scheduler run queue latency, as a histogram in microseconds:
# how long a task waited, runnable, between being woken (or preempted) and
# running again.
#
# A port of bpftrace's tools/runqlat.bt. A table keyed by thread ID keeps
# when each task became runnable: a wakeup, or a switch that leaves it on
# the run queue. The switch that runs it again reads and deletes the time.
#
# Differs from runqlat.bt: a task preempted in the kernel counts as
# queued. sched_switch reports such a task's prev_state as TASK_REPORT_MAX
# (0x100), not TASK_RUNNING (0), so runqlat.bt's "prev_state ==
# TASK_RUNNING" misses it: it sees tasks preempted on their way back to
# user mode, and those that yield, but not those preempted at a
# cond_resched() or (on preemptible kernels) anywhere in a system call.
# Here both count: prev_state 0, or the 0x100 bit. The idle task (pid 0)
# is never measured.
#
# As in bpftrace, a wakeup from a timer runs in an interrupt, and when it
# interrupts another BPF program the kernel skips the probe: status counts
# those runs as missed. The task's next switch in then finds no time, and
# is not in the histogram.

table "queued_at" {
  max_keys = 65536
}

probe "tracepoint" "wakeup" {
  event = ["sched:sched_wakeup", "sched:sched_wakeup_new"]

  on_entry {
    store "queued_at" {
      key   = [args.pid]
      value = ktime
    }
  }
}

probe "tracepoint" "switch" {
  event = "sched:sched_switch"

  on_entry {
    # The task switched out is still runnable: it yielded, or was preempted.
    store "queued_at" {
      when  = args.prev_pid != 0 && (args.prev_state == 0 || band(args.prev_state, 256) != 0)
      key   = [args.prev_pid]
      value = ktime
    }
    hist "runq_latency_us" {
      when  = args.next_pid != 0 && has(queued_at, [args.next_pid])
      value = (ktime - queued_at[args.next_pid]) / 1000
    }
    delete "queued_at" {
      key = [args.next_pid]
    }
  }
}
