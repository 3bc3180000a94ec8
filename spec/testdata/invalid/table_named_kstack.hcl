# a table named kstack
table "kstack" {} # ERROR: Table name taken
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {}
  }
}
