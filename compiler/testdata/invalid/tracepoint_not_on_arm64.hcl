# TARGET: linux-7.2-arm64
# open(2) and stat(2) are x86-64's: arm64 kernels have no tracepoints for them
probe "tracepoint" "opens" {
  event = ["syscalls:sys_enter_open", "syscalls:sys_enter_openat"] # ERROR: Tracepoint not found
  on_entry {
    count "c" {}
  }
}

probe "tracepoint" "stats" {
  event = "syscalls:sys_exit_newstat" # ERROR: Tracepoint not found
  on_entry {
    count "c" {}
  }
}

probe "tracepoint" "module" {
  event = "xfs:xfs_read_file" # ERROR: Tracepoint not found
  on_entry {
    count "c" {}
  }
}
