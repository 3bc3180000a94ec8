# by as an object: identifiers, each once
probe "tracepoint" "t" {
  event = "syscalls:sys_exit_openat"
  on_entry {
    count "a" {
      by = { "two words" = pid } # ERROR: Invalid key name
    }
    count "b" {
      by = { p = pid, p = tid } # ERROR: Duplicate key name
    }
    count "c" {
      by = "pid" # ERROR: Expected a list or an object
    }
  }
}
