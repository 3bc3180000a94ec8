# bpftrace's & is band() here; HCL's own message would suggest &&
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" { when = args.flags & 64 != 0 } # ERROR: Bitwise operator
  }
}
