# TARGET: linux-7.2-amd64
# WITHOUT: tracepoint_formats
# A facts file without formats: each probe that reads fields is reported
# once, at its first field read, naming the events whose format is unknown.
probe "tracepoint" "wakeup" {
  event = ["sched:sched_wakeup", "sched:sched_wakeup_new"]
  on_entry {
    count "c" {
      by = [args.pid, args.prio] # ERROR: Tracepoint format unknown
    }
  }
}

probe "tracepoint" "a_switch" {
  event = "sched:sched_switch"
  on_entry {
    count "c" {
      when = args.prev_pid != 0 # ERROR: Tracepoint format unknown
      by   = [args.next_pid]
    }
    sum "s" {
      value = args.next_prio
    }
  }
}

probe "tracepoint" "wakeup_again" {
  event = "sched:sched_wakeup"
  on_entry {
    count "c" {
      by = [args.pid, args.prio] # ERROR: Tracepoint format unknown
    }
  }
}

probe "tracepoint" "no_fields" {
  event = "sched:sched_process_exit"
  on_entry {
    count "c" {}
  }
}
