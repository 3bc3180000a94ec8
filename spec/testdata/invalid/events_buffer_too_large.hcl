# 2GiB is more locked kernel memory than probectl gives a buffer
events {
  buffer_size = "2GiB" # ERROR: Buffer size out of range
}

probe "tracepoint" "t" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "e" {
      fields = { pid = pid }
    }
  }
}
