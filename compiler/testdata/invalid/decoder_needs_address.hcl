# TARGET: linux-7.2-amd64
# inet and inet6 show addresses as the target lays them out
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "a" {
      by = [inet6(args.flags)] # ERROR: inet6 needs an IPv6 address
    }
  }
}
