# TARGET: linux-6.1-amd64
probe "kernel" "x" {
  functions = ["vfs_read", "vfs_write"]
  exclude   = ["vfs_w*"]
  on_entry {
    count "c" {
      when = "vfs_write" == func # ERROR: Not a function of this probe
    }
  }
}
