# Tracepoints on system calls: every aggregation, filters and events,
# with arguments typed from the events' format files.

probe "tracepoint" "reads" {
  event = "syscalls:sys_enter_read"

  on_entry {
    when = args.count > 0

    count "calls" {
      by = [comm]
    }
    sum "bytes_requested" {
      value = args.count
      by    = [pid]
    }
    min "smallest" {
      value = args.count
    }
    max "largest" {
      value = args.count
    }
    hist "size" {
      value    = args.count
      max_keys = 128
    }
    lhist "fd" {
      value = args.fd
      min   = 0
      max   = 64
      step  = 4
    }
  }
}

probe "tracepoint" "read_errors" {
  event = "syscalls:sys_exit_read"

  on_entry {
    count "errors" {
      when = args.ret < 0
      by   = [args.ret]
    }
    event "failure" {
      when   = args.ret < 0 && comm != "probectl"
      fields = { pid = pid, tid = tid, errno = -args.ret, comm = comm, at = ktime }
    }
  }
}

probe "tracepoint" "openat_flags" {
  event = "syscalls:sys_enter_openat"

  on_entry {
    count "by_flags" {
      by = [band(args.flags, 3), shr(args.flags, 6) % 2 == 1 ? 1 : 0]
    }
    count "creates" {
      when = band(args.flags, 64) != 0 || bxor(args.mode, 0) > 0
    }
    sum "cpu_weighted" {
      value = cpu * 10 + uid - gid + bnot(0) + shl(1, 2) + bor(1, 2) - (tid / 2) + (pid % 7)
    }
  }
}
