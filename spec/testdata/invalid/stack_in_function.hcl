# a stack given to a bit function
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      by = [band(ustack, 255)] # ERROR: Stack used as a value
    }
  }
}
