# comm vs int
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    when = comm == 3 # ERROR: Mismatched comparison
    count "c" {}
  }
}
