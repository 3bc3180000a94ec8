# an event name with a NUL: refused before tracefs sees it
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_\u0000read" # ERROR: Invalid tracepoint event
  on_entry {
    count "c" {}
  }
}
