# lhist zero step
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    lhist "l" {
      value = args.count
      min   = 0
      max   = 100
      step  = 0 # ERROR: Invalid lhist step
    }
  }
}
