# TARGET: linux-7.2-amd64
# FUNCTIONS: vfs_read vfs_write vfs_readv ksys_read
probe "kernel" "x" {
  functions = ["vfs_raed"] # ERROR: Function not found
  on_entry {
    count "c" {}
  }
}
