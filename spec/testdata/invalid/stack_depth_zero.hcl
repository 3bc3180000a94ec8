# kstack(0)
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      by = [kstack(0)] # ERROR: Expected a number
    }
  }
}
