# str() of what is already a string, and of a condition
probe "tracepoint" "a" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" { by = [str(comm)] } # ERROR: Already a string
    count "d" { by = [str(1 == 1)] } # ERROR: str needs a pointer
  }
}
