# The built-in example of "probectl run": system calls, through tracepoints,
# which every kernel probectl runs on has.

probe "tracepoint" "read_sizes" {
  event = "syscalls:sys_exit_read"

  on_entry {
    hist "bytes" {
      when  = args.ret >= 0
      value = args.ret
    }
    count "errors" {
      when = args.ret < 0
      by   = [comm, args.ret]
    }
  }
}

probe "tracepoint" "open_calls" {
  event = "syscalls:sys_enter_openat"

  on_entry {
    count "by_comm" {
      by = [comm]
    }
  }
}

probe "tracepoint" "failed_opens" {
  event = "syscalls:sys_exit_openat"

  on_entry {
    event "failed_open" {
      when   = args.ret < 0
      fields = { pid = pid, comm = comm, errno = -args.ret }
    }
  }
}
