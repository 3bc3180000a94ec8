# bad probe name
probe "kernel" "vfs-latency" { # ERROR: Invalid probe name
  functions = ["vfs_read"]
  on_entry {
    count "c" {}
  }
}
