# TARGET: linux-7.2-amd64
# export_stacks on a key without a stack
probe "tracepoint" "nostack" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" { # ERROR: No stack to export
      by            = [comm]
      export_stacks = true
    }
  }
}
