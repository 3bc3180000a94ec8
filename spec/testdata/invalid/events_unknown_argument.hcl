# the events block sets the buffer's size only
events {
  size = "4MiB" # ERROR: Unsupported argument
}

probe "tracepoint" "t" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "e" {
      fields = { pid = pid }
    }
  }
}
