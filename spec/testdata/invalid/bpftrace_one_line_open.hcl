# an argument on the line of the { of a block that goes on below
probe "tracepoint" "t" { event = "syscalls:sys_enter_openat" # ERROR: Block on one line
  on_entry {
    count "n" {}
  }
}
