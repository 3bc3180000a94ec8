# The three probes from the spec language's contract.

probe "kernel" "vfs_latency" {
  functions       = ["vfs_read", "vfs_write"]
  exclude         = []
  attach          = "auto"
  entry_data_size = 8

  on_entry {
    when = comm != "sshd"
    save = { start = ktime }
  }

  on_exit {
    hist "latency_ns" {
      value = ktime - entry.start
      by    = [func]
    }
    count "errors" {
      when = ret < 0
      by   = [func, ret]
    }
  }
}

probe "user" "mallocs" {
  binary    = "/lib/x86_64-linux-gnu/libc.so.6"
  functions = ["malloc", "calloc"]
  pid       = 0
  on_entry {
    hist "size" { value = arg0 }
  }
}

probe "tracepoint" "opens" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    count "by_comm" { by = [comm] }
  }
}
