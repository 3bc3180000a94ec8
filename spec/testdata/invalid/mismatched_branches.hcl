# mismatched branches
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    sum "s" {
      value = pid > 0 ? 1 : true # ERROR: Mismatched branches
    }
  }
}
