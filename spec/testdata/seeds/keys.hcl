# Seeds for the fuzzers: named columns, every decoder, casts and hex
# numbers, optional patterns.
labels "open_flag" {
  values = { 0 = "O_RDONLY", 1 = "O_WRONLY", 2 = "O_RDWR", -1 = "NONE", "0x10" = "SIXTEEN" }
}

probe "tracepoint" "keys" {
  event = ["raw_syscalls:sys_exit", optional("syscalls:sys_enter_nosuch")]
  on_entry {
    count "calls" {
      when = args.ret < 0 && band(args.id, hex("0xffff")) != hex("-0x1")
      by = {
        call   = syscall_name(args.id)
        errno  = errno_name(args.ret)
        signal = signal_name(s8(args.ret))
        flag   = labels(open_flag, u8(args.ret))
        raw    = hex(u32(args.ret))
        group  = cgroup_path(cgroup)
        small  = s16(u16(args.ret))
      }
    }
    event "e" {
      fields = {
        addr  = inet(u32(args.ret), u16(args.id))
        addr4 = inet(s32(args.ret))
        cg    = cgroup_path(cgroup)
      }
    }
  }
}
