# buffer_size is a size, not a list or a bool
events {
  buffer_size = true # ERROR: Invalid buffer size
}

probe "tracepoint" "t" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "e" {
      fields = { pid = pid }
    }
  }
}
