# the event buffer is from 4KiB to 1GiB
events {
  buffer_size = 2048 # ERROR: Buffer size out of range
}

probe "tracepoint" "t" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "e" {
      fields = { pid = pid }
    }
  }
}
