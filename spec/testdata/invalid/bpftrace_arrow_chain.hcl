# a chain of -> is one error
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "a" { by = [curtask->real_parent->tgid] } # ERROR: Use . for fields
  }
}
