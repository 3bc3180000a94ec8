# arithmetic on a stack
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      by = [kstack + 1] # ERROR: Stack used as a value
    }
  }
}
