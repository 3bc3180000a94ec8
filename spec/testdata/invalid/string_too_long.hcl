# string too long
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    when = comm == "a-very-long-command-name" # ERROR: String too long
    count "c" {}
  }
}
