# execsnoop: new programs, one event per execve(2) or execveat(2) call,
# with the arguments it passes.
#
# A port of bpftrace's tools/execsnoop.bt: the entry of every exec system
# call (the glob "syscalls:sys_enter_exec*"), the caller's pid, its
# parent's (ppid: the current task's real_parent, through the kernel's
# BTF) and the argument vector, joined with spaces.
#
# Differs from execsnoop.bt: the event says which system call fired
# (execve or execveat), and the time is the event's arrival, printed by
# probectl. As in bpftrace, this is the entry: the call may still fail.
#
# join reads at most 16 arguments, 256 bytes in all, each with its NUL;
# the argument that does not fit is cut. It reads the caller's memory at
# the call's entry and cannot fault pages in: an argument on a page the
# caller has not touched since fork (a string literal, in a child that
# execs at once) ends the list there, as an empty argument does. A
# shell's or a runtime's argv is on its heap, and is read whole.

probe "tracepoint" "exec" {
  event = "syscalls:sys_enter_exec*"

  on_entry {
    event "exec" {
      fields = {
        pid     = pid
        ppid    = ppid
        syscall = event
        args    = join(args.argv)
      }
    }
  }
}
