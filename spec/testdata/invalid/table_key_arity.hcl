# a read with one key part, where the stores key by two
table "t" {}

probe "tracepoint" "a" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    store "t" {
      key   = [tid, pid]
      value = ktime
    }
    count "c" { when = has(t, [tid]) } # ERROR: Wrong key
  }
}
