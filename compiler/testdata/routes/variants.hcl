# Route and entry-data variants the examples do not reach on every profile;
# the verifier test loads them where the target allows.

probe "kernel" "multi_pair" {
  functions = ["vfs_read", "vfs_write"]
  attach    = "kprobe.multi"
  on_entry {
    when = comm != "init"
    save = { start = ktime, fd = arg0 }
  }
  on_exit {
    hist "ns" {
      value = ktime - entry.start
      by    = [func, entry.fd]
    }
  }
}

probe "kernel" "session_map" {
  functions = ["vfs_read"]
  attach    = "kprobe.session"
  on_entry {
    save = { start = ktime, who = comm, size = arg2 }
  }
  on_exit {
    sum "bytes" {
      when  = ret > 0
      value = ret
      by    = [entry.who]
    }
    lhist "ms" {
      value = (ktime - entry.start) / 1000000
      min   = 0
      max   = 100
      step  = 10
    }
  }
}

probe "kernel" "session_entry_only" {
  functions = ["vfs_read"]
  attach    = "kprobe.session"
  on_entry {
    count "calls" { by = [cpu] }
  }
}

probe "kernel" "exit_only" {
  functions = ["vfs_read", "vfs_write"]
  on_exit {
    count "rets" {
      by = [func, ret < 0 ? ret : 0]
    }
    event "ret" {
      fields = { f = func, r = ret, c = comm }
    }
  }
}

probe "kernel" "filter_only_entry" {
  functions = ["vfs_read"]
  attach    = "kprobe"
  on_entry {
    when = uid == 0 && (pid % 2 == 0 || tid / 3 > 10)
  }
  on_exit {
    min "least" { value = ret }
    max "most" { value = -ret }
  }
}

# Stacks taken at entry, saved for the exit (a user stack is 16 bytes:
# its id and the process), and as event fields.
probe "kernel" "stacks_saved" {
  functions = ["vfs_read"]
  attach    = "kprobe.multi"
  on_entry {
    save = { k = kstack(8), u = ustack(6) }
  }
  on_exit {
    count "by_stack" {
      by = [entry.k, entry.u, kstack(4)]
    }
    event "read" {
      fields = { k = entry.k, u = ustack(6), n = ret }
    }
  }
}

probe "kernel" "stacks_fentry" {
  functions = ["vfs_write"]
  attach    = "fentry"
  on_entry {
    count "by_stack" {
      by = [kstack, ustack]
    }
  }
}

table "stack_of" {}

probe "tracepoint" "stacks_table" {
  event = ["syscalls:sys_enter_read", "syscalls:sys_exit_read"]
  on_entry {
    store "stack_of" {
      when  = event == "syscalls:sys_enter_read"
      key   = [tid]
      value = ustack(5)
    }
    count "reads" {
      when = event == "syscalls:sys_exit_read"
      by   = [stack_of[tid]]
    }
  }
}

probe "kernel" "prefer_hits" {
  functions = ["vfs_read"]
  prefer    = "hits"
  on_entry {
    save = { start = ktime }
  }
  on_exit {
    hist "ns" { value = ktime - entry.start }
  }
}

probe "kernel" "prefer_attach" {
  functions = ["vfs_read", "vfs_write"]
  prefer    = "attach"
  on_entry {
    count "calls" { by = [func] }
  }
}
