# a line of @map or $variable does not hide the file's other errors, and
# its handler is not also said to do nothing
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    @opens[comm] = count() # ERROR: bpftrace map
    $start = nsecs # ERROR: bpftrace variable
  }
}
probe "tracepoint" "u" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" { when = comm > 3 } # ERROR: > needs integers
  }
}
