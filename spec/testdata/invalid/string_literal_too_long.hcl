# a literal longer than the string it is compared with never matches
probe "tracepoint" "a" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" { when = str(args.filename, 8) == "/etc/passwd" } # ERROR: String too long
  }
}
