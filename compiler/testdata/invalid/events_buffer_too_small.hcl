# TARGET: linux-7.2-amd64
# a record larger than the event buffer could never be written: 17 strings
# of 256 bytes and the headers do not fit in 4KiB
events {
  buffer_size = "4KiB" # ERROR: Event buffer too small
}

probe "tracepoint" "t" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    event "big" {
      fields = {
        f00 = str(args.filename, 256)
        f01 = str(args.filename, 256)
        f02 = str(args.filename, 256)
        f03 = str(args.filename, 256)
        f04 = str(args.filename, 256)
        f05 = str(args.filename, 256)
        f06 = str(args.filename, 256)
        f07 = str(args.filename, 256)
        f08 = str(args.filename, 256)
        f09 = str(args.filename, 256)
        f10 = str(args.filename, 256)
        f11 = str(args.filename, 256)
        f12 = str(args.filename, 256)
        f13 = str(args.filename, 256)
        f14 = str(args.filename, 256)
        f15 = str(args.filename, 256)
        f16 = str(args.filename, 256)
      }
    }
  }
}
