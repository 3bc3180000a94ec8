# TARGET: linux-7.2-amd64
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" {
      by = [args.path] # ERROR: Unknown tracepoint field
    }
  }
}
