# naptime: voluntary sleeps (nanosleep and clock_nanosleep), one event per
# sleep that completes: who slept, and for how long they asked.
#
# A port of bpftrace's tools/naptime.bt. The entry probe keeps the
# request's pointer (a struct __kernel_timespec in the process's memory)
# in a table keyed by thread ID; the exit probe reads the struct's fields
# there with user_cast, which reads user memory typed by the kernel's BTF
# (bpf_probe_read_user), emits the event and deletes the key.

table "rqtp" {
  max_keys = 4096
}

probe "tracepoint" "nap_enter" {
  event = ["syscalls:sys_enter_clock_nanosleep", "syscalls:sys_enter_nanosleep"]

  on_entry {
    store "rqtp" {
      key   = [tid]
      value = args.rqtp
    }
  }
}

probe "tracepoint" "nap_exit" {
  event = ["syscalls:sys_exit_clock_nanosleep", "syscalls:sys_exit_nanosleep"]

  on_entry {
    event "nap" {
      when = has(rqtp, [tid]) && args.ret == 0
      fields = {
        ppid  = ppid
        pcomm = task.real_parent.comm
        pid   = pid
        comm  = comm
        sec   = user_cast(rqtp[tid], "struct __kernel_timespec").tv_sec
        nsec  = user_cast(rqtp[tid], "struct __kernel_timespec").tv_nsec
      }
    }
    delete "rqtp" {
      key = [tid]
    }
  }
}
