# not whole number
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    sum "s" {
      value = args.count * 1.5 # ERROR: Not a whole number
    }
  }
}
