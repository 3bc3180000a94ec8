# lhist too many buckets
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    lhist "l" {
      value = args.count
      min   = 0
      max   = 1000000
      step  = 1 # ERROR: Too many lhist buckets
    }
  }
}
