# sizes are written with binary units (KiB, MiB, GiB), never MB: a
# decimal megabyte is not a power of two
events {
  buffer_size = "4MB" # ERROR: Invalid buffer size
}

probe "tracepoint" "t" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "e" {
      fields = { pid = pid }
    }
  }
}
