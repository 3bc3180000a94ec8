# two stores into one table, with different types
table "t" {}

probe "tracepoint" "a" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    store "t" {
      key   = [tid]
      value = ktime
    }
    count "c" { when = has(t, [tid]) }
  }
}

probe "tracepoint" "b" {
  event = "syscalls:sys_exit_openat"
  on_entry {
    store "t" {
      key   = [tid]
      value = comm # ERROR: Mismatched table types
    }
  }
}
