# a table of stacks stored at two depths
table "stacks" {}
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    store "stacks" {
      key   = [tid]
      value = kstack(10)
    }
  }
}
probe "tracepoint" "u" {
  event = "syscalls:sys_enter_write"
  on_entry {
    store "stacks" {
      key   = [tid]
      value = kstack # ERROR: Mismatched table types
    }
  }
}
probe "tracepoint" "v" {
  event = "syscalls:sys_exit_read"
  on_entry {
    count "c" {
      by = [stacks[tid]]
    }
  }
}
