# TARGET: linux-7.2-amd64
probe "kernel" "x" {
  functions = ["vfs_read", "vfs_write"]
  on_entry {
    count "c" {
      when = func == "vfs_readv" # ERROR: Not a function of this probe
    }
  }
}
