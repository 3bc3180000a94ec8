probe "tracepoint" "opens" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    when = pid != 1
    count "by_comm" { by = [comm] }
  }
}

probe "tracepoint" "reads" {
  event = "syscalls:sys_enter_read"
  on_entry {
    hist "size" {
      value    = args.count
      max_keys = 64
    }
  }
}

probe "tracepoint" "writes" {
  event = "syscalls:sys_enter_write"
  on_entry {
    count "by_pid" { by = [pid] }
  }
}

probe "tracepoint" "closes" {
  event = "syscalls:sys_enter_close"
  on_entry {
    count "n" {}
    sum "fds" { value = args.fd }
  }
}

probe "tracepoint" "old_state" {
  event = "syscalls:sys_enter_dup"
  on_entry {
    count "n" {}
  }
}

probe "tracepoint" "unchanged" {
  event = "syscalls:sys_enter_pipe2"
  on_entry {
    count "n" {}
  }
}
