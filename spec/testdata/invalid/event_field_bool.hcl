# event field bool
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    event "e" {
      fields = { big = args.count > 10 } # ERROR: Field cannot hold this
    }
  }
}
