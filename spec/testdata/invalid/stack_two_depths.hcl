# kstack(1, 2)
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      by = [kstack(1, 2)] # ERROR: Wrong number of arguments
    }
  }
}
