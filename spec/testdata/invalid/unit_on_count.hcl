# count counts calls: it has no unit
probe "tracepoint" "t" {
  event = "raw_syscalls:sys_exit"
  on_entry {
    count "c" {
      unit = "ns" # ERROR: Argument not valid here
    }
  }
}
