# Kernel functions: entry-only globs, entry and exit with entry data,
# return values, and probes that insist on a link family.

probe "kernel" "syscall_entries" {
  functions = ["ksys_*"]
  exclude   = ["ksys_sync*"]

  on_entry {
    count "calls" {
      by = [func]
    }
  }
}

probe "kernel" "write_latency" {
  functions = ["ksys_write"]

  on_entry {
    when = pid != 1
    save = { start = ktime, fd = arg0, size = arg2 }
  }

  on_exit {
    hist "latency_ns" {
      value = ktime - entry.start
    }
    lhist "size_kib" {
      value = entry.size / 1024
      min   = 0
      max   = 64
      step  = 8
    }
    count "errors" {
      when = ret < 0
      by   = [func, ret]
    }
    max "slowest_ns" {
      value = ktime - entry.start
      by    = [comm]
    }
    event "slow_write" {
      when   = ktime - entry.start > 1000000
      fields = { pid = pid, fd = entry.fd, ns = ktime - entry.start, ret = ret }
    }
  }
}

probe "kernel" "read_returns" {
  functions = ["ksys_read"]

  on_exit {
    sum "bytes" {
      when  = ret > 0
      value = ret
    }
    min "worst_error" {
      value = ret
    }
  }
}

probe "kernel" "legacy_kprobe" {
  functions = ["vfs_fsync_range"]
  attach    = "kprobe"

  on_entry {
    save = { start = ktime }
  }
  on_exit {
    hist "fsync_ns" {
      value = ktime - entry.start
    }
  }
}

probe "kernel" "trampoline" {
  functions = ["vfs_statx"]
  attach    = "fentry"

  on_entry {
    count "stats" {
      by = [uid]
    }
  }
  on_exit {
    count "results" {
      by = [ret == 0 ? 0 : 1]
    }
  }
}
