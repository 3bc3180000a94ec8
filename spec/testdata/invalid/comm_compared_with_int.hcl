# comm compared with int
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    when = comm > 3 # ERROR: > needs integers
    count "c" {}
  }
}
