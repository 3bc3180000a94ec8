# a stack summed
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    sum "s" {
      value = kstack(5) # ERROR: Stack used as a value
    }
  }
}
