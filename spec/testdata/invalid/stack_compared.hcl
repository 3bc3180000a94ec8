# a stack compared with a number
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      when = ustack != 0 # ERROR: Stack used as a value
    }
  }
}
