# a store into a table nobody declared
probe "tracepoint" "a" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    store "queued" { # ERROR: Unknown table
      key   = [tid]
      value = ktime
    }
  }
}
