# a ring buffer is a power of two bytes: 3MiB is not, 2MiB and 4MiB are
events {
  buffer_size = "3MiB" # ERROR: Buffer size not a power of two
}

probe "tracepoint" "t" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "e" {
      fields = { pid = pid }
    }
  }
}
