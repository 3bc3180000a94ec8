# and/or are && and || here
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    when = pid > 1 and pid < 100 # ERROR: Use !, && and ||
  }
}
