# a table named like a built-in value could never be read
table "pid" {} # ERROR: Table name taken

probe "tracepoint" "a" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" {}
  }
}
