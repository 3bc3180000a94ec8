# a spec set has one event buffer, so one events block
events {
  buffer_size = "4MiB"
}

events { # ERROR: Duplicate events block
  buffer_size = "8MiB"
}

probe "tracepoint" "t" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "e" {
      fields = { pid = pid }
    }
  }
}
