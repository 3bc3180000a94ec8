# a block holding a block takes several lines
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry { count "n" {} } # ERROR: Block on one line
}
