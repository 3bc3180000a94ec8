# bpftrace's -> is . here
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" {
      when = args->flags == 1 # ERROR: Use . for fields
    }
  }
}
