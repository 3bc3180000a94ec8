# a bpftrace variable is save/entry here
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    $start = nsecs # ERROR: bpftrace variable
  }
}
