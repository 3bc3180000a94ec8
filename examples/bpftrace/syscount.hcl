# syscount: system calls counted by number and by process, from the
# entry of every system call.
#
# A port of bpftrace's tools/syscount.bt: the raw_syscalls:sys_enter
# tracepoint, one count keyed by the call's number (args.id) and one by
# the task name.
#
# Differs from syscount.bt: show prints every key, sorted by count
# (syscount.bt prints the top 10 of each), and a call is its number, as
# syscount.bt prints it by default (its --sysname option names it: there
# is no decoder of system call names here; ausyscall --dump lists them).

probe "tracepoint" "syscalls" {
  event = "raw_syscalls:sys_enter"

  on_entry {
    count "syscalls" {
      by = [args.id]
    }
    count "processes" {
      by = [comm]
    }
  }
}
