# a table stored into but never read
table "t" {} # ERROR: Table never read

probe "tracepoint" "a" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    store "t" {
      key   = [tid]
      value = ktime
    }
  }
}
