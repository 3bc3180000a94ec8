# unknown name
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    when = comn != "sshd" # ERROR: Unknown name
    count "c" {}
  }
}
