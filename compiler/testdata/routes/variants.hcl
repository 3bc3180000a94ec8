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
