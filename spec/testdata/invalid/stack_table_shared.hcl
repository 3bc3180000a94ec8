# a stack stored in a table that another probe reads
table "stacks" {}
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    store "stacks" {
      key   = [tid]
      value = kstack # ERROR: Stack in a table
    }
  }
}
probe "tracepoint" "u" {
  event = "syscalls:sys_exit_read"
  on_entry {
    count "c" {
      by = [stacks[tid]]
    }
  }
}
