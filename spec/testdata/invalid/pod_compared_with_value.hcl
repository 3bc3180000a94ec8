# pod compared with a value: pods are matched by name
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    when = pod == comm # ERROR: Pods compare with a name
    count "c" { by = { pod = pod } }
  }
}
