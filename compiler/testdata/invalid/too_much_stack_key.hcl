# TARGET: linux-7.2-amd64
# a key is built on the stack: two strings of 256 bytes do not fit in 512
probe "tracepoint" "wide" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "c" { # ERROR: Too much stack
      by = { a = str(args.filename, 256), b = str(args.filename, 255) }
    }
  }
}
