# width and sign casts take one integer
probe "tracepoint" "t" {
  event = "syscalls:sys_exit_openat"
  on_entry {
    sum "a" {
      value = s32(args.ret, 1) # ERROR: Wrong number of arguments
    }
    sum "b" {
      value = u16(comm) # ERROR: u16 needs an integer
    }
  }
}
