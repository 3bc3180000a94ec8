# two by columns that would be one label
probe "tracepoint" "t" {
  event = "raw_syscalls:sys_exit"
  on_entry {
    count "c" {
      by = [errno_name(args.ret),
        errno_name(-args.ret)] # ERROR: Label names meet
    }
  }
}
