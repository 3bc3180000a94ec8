# wrong arg count
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    sum "s" {
      value = band(args.count) # ERROR: Wrong number of arguments
    }
  }
}
