# a bare hex literal says to write hex("0x40")
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" {
      when = band(args.flags, 0x40) != 0 # ERROR: Hex literal
    }
  }
}
