# kstack.x
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      by = [kstack.frames] # ERROR: Unsupported traversal
    }
  }
}
