# TARGET: linux-6.12-arm64
probe "kernel" "x" {
  functions = ["vfs_*"]
  on_entry {
    count "c" {
      when = func != "vfs_read" # ERROR: Function list unknown
    }
  }
}
