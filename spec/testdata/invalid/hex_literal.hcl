# a hexadecimal number, which HCL does not have
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    count "c" {
      by = [band(args.fd, 0xff)] # ERROR: Not a decimal number
    }
  }
}
