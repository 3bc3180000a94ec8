# invalid action name
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "calls-per-sec" {} # ERROR: Invalid action name
  }
}
