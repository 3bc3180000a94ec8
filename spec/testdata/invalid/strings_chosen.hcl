# strings chosen by a conditional
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    event "e" {
      fields = { who = pid > 1 ? comm : comm } # ERROR: Strings cannot be chosen
    }
  }
}
