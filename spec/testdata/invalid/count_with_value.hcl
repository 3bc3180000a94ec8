# count with value
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      value = args.count # ERROR: Argument not valid here
    }
  }
}
