# duplicate action
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {}
    sum "c" { # ERROR: Duplicate action name
      value = args.count
    }
  }
}
