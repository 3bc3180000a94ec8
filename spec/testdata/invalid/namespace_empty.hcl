# namespace compared with "": no pod has none
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    when = namespace != "" # ERROR: Empty name
    count "c" { by = { pod = pod } }
  }
}
