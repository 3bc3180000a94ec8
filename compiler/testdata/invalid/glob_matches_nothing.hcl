# TARGET: linux-7.2-amd64
# FUNCTIONS: vfs_read vfs_write
probe "kernel" "x" {
  functions = ["tcp_*"] # ERROR: Pattern matches nothing
  on_entry {
    count "c" {}
  }
}
