# TARGET: linux-7.2-amd64
# an event glob that matches none of the target's events
probe "tracepoint" "t" {
  event = ["syscalls:sys_enter_openat", "syscalls:sys_enter_nothing*"] # ERROR: Glob matches no event
  on_entry {
    count "c" {}
  }
}
