# func on tracepoint
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      by = [func] # ERROR: func is not for tracepoints
    }
  }
}
