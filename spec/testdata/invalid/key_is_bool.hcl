# key is bool
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      by = [pid > 1] # ERROR: Key is a bool
    }
  }
}
