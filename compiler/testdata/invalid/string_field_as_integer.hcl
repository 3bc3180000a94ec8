# TARGET: linux-7.2-amd64
# a pointer field is an integer; a string of it cannot be summed
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    sum "s" { value = args.filename }
    count "c" { when = args.filename == "/etc" } # ERROR: Mismatched comparison
  }
}
