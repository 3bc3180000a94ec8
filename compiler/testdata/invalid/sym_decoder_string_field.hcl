# TARGET: linux-7.2-amd64
# ksym and usym take an address: a char array of a tracepoint is text
probe "tracepoint" "t" {
  event = "sched:sched_switch"
  on_entry {
    count "a" {
      by = [ksym(args.prev_comm)] # ERROR: Not an integer
    }
    event "b" {
      fields = { fn = usym(args.next_comm) } # ERROR: Not an integer
    }
  }
}
