# lhist empty range
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    lhist "l" {
      value = args.count
      min   = 100
      max   = 10 # ERROR: Invalid lhist range
      step  = 1
    }
  }
}
