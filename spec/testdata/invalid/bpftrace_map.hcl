# a bpftrace map statement is an aggregation block here
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    @opens[comm] = count() # ERROR: bpftrace map
  }
}
