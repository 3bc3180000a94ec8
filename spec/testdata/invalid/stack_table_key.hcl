# a stack as a table key
table "seen" {}
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    store "seen" {
      key   = [kstack] # ERROR: Stack as a table key
      value = 1
    }
  }
}
probe "tracepoint" "u" {
  event = "syscalls:sys_exit_read"
  on_entry {
    count "c" {
      when = has(seen, [pid])
    }
  }
}
