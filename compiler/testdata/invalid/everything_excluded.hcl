# TARGET: linux-7.2-amd64
# FUNCTIONS: vfs_read vfs_write
probe "kernel" "x" { # ERROR: Every function excluded
  functions = ["vfs_*"]
  exclude   = ["vfs_*"]
  on_entry {
    count "c" {}
  }
}
