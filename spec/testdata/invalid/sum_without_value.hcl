# sum without value
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    sum "s" { # ERROR: Missing required argument
      by = [pid]
    }
  }
}
