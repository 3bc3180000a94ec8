# several events are a list, not one string with commas
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_open*,syscalls:sys_exit_open*" # ERROR: Several events in one string
  on_entry {
    count "c" {}
  }
}
