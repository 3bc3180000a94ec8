# a unit the scrape cannot convert
probe "tracepoint" "t" {
  event = "raw_syscalls:sys_exit"
  on_entry {
    hist "h" {
      value = args.ret
      unit  = "minutes" # ERROR: Unknown unit
    }
  }
}
