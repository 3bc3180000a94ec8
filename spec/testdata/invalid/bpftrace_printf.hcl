# bpftrace's printf() as a statement is an event block here
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    printf("%d\n", pid) # ERROR: Function call as a statement
  }
}
