# killsnoop: signals sent with kill(2), tkill(2) and tgkill(2), one event
# per call as it returns: who sent which signal to whom, and the result.
#
# A port of bpftrace's tools/killsnoop.bt. The entry probe keeps the
# target and the signal in a table keyed by thread ID; the exit probe
# joins them with the result, then deletes the key. tpid is the pid (kill)
# or thread ID (tkill, tgkill) the signal was sent to; result is 0 or
# -errno (-3 ESRCH: no such process).
#
# The signal shows by name through signal_name (SIGKILL); 0, which sends
# nothing and only checks, as N/A, as killsnoop.bt prints it. Differs
# from killsnoop.bt: a real-time signal shows as SIGRTMIN+2 (killsnoop.bt
# prints its number), and the event says which system call it was.

table "sent" {
  max_keys = 10240
}

probe "tracepoint" "kill_enter" {
  event = ["syscalls:sys_enter_kill", "syscalls:sys_enter_tkill", "syscalls:sys_enter_tgkill"]

  on_entry {
    store "sent" {
      key   = [tid]
      value = { tpid = args.pid, sig = args.sig }
    }
  }
}

probe "tracepoint" "kill_exit" {
  event = ["syscalls:sys_exit_kill", "syscalls:sys_exit_tkill", "syscalls:sys_exit_tgkill"]

  on_entry {
    event "kill" {
      when = has(sent, [tid])
      fields = {
        pid     = pid
        comm    = comm
        syscall = event
        sig     = signal_name(sent[tid].sig)
        tpid    = sent[tid].tpid
        result  = args.ret
      }
    }
    delete "sent" {
      key = [tid]
    }
  }
}
