# TARGET: linux-6.1-amd64
probe "kernel" "x" {
  functions = ["vfs_read"]
  attach    = "kprobe.session" # ERROR: Attach family not available
  on_exit {
    count "c" {}
  }
}
