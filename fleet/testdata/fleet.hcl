# The spec the cluster plan tests plan for every node: an entry+exit probe
# and an entry-only one, whose routes differ by kernel (README, routes).

probe "kernel" "vfs_latency" {
  functions = ["vfs_read", "vfs_write"]
  on_entry {
    save = { start = ktime }
  }
  on_exit {
    hist "latency_ns" {
      value = ktime - entry.start
      by    = [func]
    }
  }
}

probe "kernel" "opens" {
  functions = ["do_sys_openat2"]
  on_entry {
    count "calls" { by = [comm] }
  }
}
