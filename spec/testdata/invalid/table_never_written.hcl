# a table read but never stored into
table "t" {} # ERROR: Table never written

probe "tracepoint" "a" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" { when = has(t, [tid]) }
  }
}
