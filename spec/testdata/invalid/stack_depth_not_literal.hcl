# ustack(pid): the depth is a literal
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      by = [ustack(pid)] # ERROR: Expected a number
    }
  }
}
