# TARGET: linux-7.2-amd64
# a field read over several events, one of which lacks it
probe "tracepoint" "t" {
  event = ["syscalls:sys_enter_openat", "syscalls:sys_enter_read"]
  on_entry {
    count "c" { by = [str(args.filename)] } # ERROR: Field missing from events
  }
}
