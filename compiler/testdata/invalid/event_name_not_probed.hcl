# TARGET: linux-7.2-amd64
# event compared with an event the probe does not attach
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_exec*"
  on_entry {
    count "c" { when = event == "syscalls:sys_enter_openat" } # ERROR: Not an event of this probe
  }
}
