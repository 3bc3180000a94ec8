# decoders only change how a key or field shows
probe "tracepoint" "t" {
  event = "syscalls:sys_exit_openat"
  on_entry {
    count "a" {
      when = errno_name(args.ret) == 2 # ERROR: Decoder used as a value
    }
    sum "b" {
      value = hex(args.ret) # ERROR: Decoder used as a value
    }
    count "c" {
      by = { e = errno_name(comm) } # ERROR: errno_name needs an integer
    }
    count "d" {
      by = { e = signal_name(1, 2) } # ERROR: Wrong number of arguments
    }
    count "e" {
      by = [inet(comm)] # ERROR: inet needs an IPv4 address
    }
    count "f" {
      by = [inet6(pid)] # ERROR: inet6 needs an IPv6 address
    }
    count "g" {
      by = [inet(args.ret, comm)] # ERROR: inet needs a port
    }
  }
}
