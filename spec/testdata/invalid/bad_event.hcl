# bad event
probe "tracepoint" "t" {
  event = "sys_enter_openat" # ERROR: Invalid tracepoint event
  on_entry {
    count "c" {}
  }
}
