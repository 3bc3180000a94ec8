# setuids: the setuid(2) family, one event per call as it returns: who
# asked for which user IDs, and what the kernel said. Privilege changes.
#
# A port of bpftrace's tools/setuids.bt. The entry probes keep the
# caller's uid (before the call changes it) and the arguments in tables
# keyed by thread ID; each exit probe joins them with the result and
# deletes the key. The IDs are the system call's arguments as passed: -1
# ("leave unchanged") is 4294967295 as a uid_t. setfsuid returns the
# previous fsuid, not an error, and its event says so.
#
# Differs from setuids.bt: the time is the event's arrival, printed by
# probectl; everything else is the same.

table "setuid_args" {
  max_keys = 10240
}

table "setresuid_args" {
  max_keys = 10240
}

probe "tracepoint" "setuid_enter" {
  event = ["syscalls:sys_enter_setuid", "syscalls:sys_enter_setfsuid"]

  on_entry {
    store "setuid_args" {
      key   = [tid]
      value = { uid = uid, target = args.uid }
    }
  }
}

probe "tracepoint" "setresuid_enter" {
  event = "syscalls:sys_enter_setresuid"

  on_entry {
    store "setresuid_args" {
      key   = [tid]
      value = { uid = uid, ruid = args.ruid, euid = args.euid, suid = args.suid }
    }
  }
}

probe "tracepoint" "setuid_exit" {
  event = "syscalls:sys_exit_setuid"

  on_entry {
    event "setuid" {
      when   = has(setuid_args, [tid])
      fields = { pid = pid, comm = comm, uid = setuid_args[tid].uid, target = setuid_args[tid].target, ret = args.ret }
    }
    delete "setuid_args" {
      key = [tid]
    }
  }
}

probe "tracepoint" "setfsuid_exit" {
  event = "syscalls:sys_exit_setfsuid"

  on_entry {
    event "setfsuid" {
      when   = has(setuid_args, [tid])
      fields = { pid = pid, comm = comm, uid = setuid_args[tid].uid, target = setuid_args[tid].target, prev_fsuid = args.ret }
    }
    delete "setuid_args" {
      key = [tid]
    }
  }
}

probe "tracepoint" "setresuid_exit" {
  event = "syscalls:sys_exit_setresuid"

  on_entry {
    event "setresuid" {
      when = has(setresuid_args, [tid])
      fields = {
        pid  = pid
        comm = comm
        uid  = setresuid_args[tid].uid
        ruid = setresuid_args[tid].ruid
        euid = setresuid_args[tid].euid
        suid = setresuid_args[tid].suid
        ret  = args.ret
      }
    }
    delete "setresuid_args" {
      key = [tid]
    }
  }
}
