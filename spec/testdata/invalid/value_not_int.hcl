# value not int
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    sum "s" {
      value = comm # ERROR: Value is not an integer
    }
  }
}
