# TARGET: linux-7.2-amd64
probe "tracepoint" "t" {
  event = "sched:sched_switch"
  on_entry {
    count "c" {
      by = [args.prev_pid] # ERROR: Tracepoint format unknown
    }
  }
}
