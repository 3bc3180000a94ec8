# hex("...") takes hex digits that fit in 64 bits
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" {
      when = args.flags == hex("0xzz") # ERROR: Invalid hex number
    }
    count "d" {
      when = args.flags == hex("0x10000000000000000") # ERROR: Invalid hex number
    }
    count "e" {
      when = args.flags == hex("") # ERROR: Invalid hex number
    }
  }
}
