# unknown function
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    sum "s" {
      value = popcount(args.count) # ERROR: Unknown function
    }
  }
}
