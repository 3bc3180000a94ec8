# TARGET: linux-6.12-arm64
probe "kernel" "x" {
  functions = ["vfs_read"]
  attach    = "kprobe.multi" # ERROR: Attach family not available
  on_entry {
    count "c" {}
  }
}
