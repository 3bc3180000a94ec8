# binary on kernel
probe "kernel" "x" {
  functions = ["vfs_read"]
  binary    = "/bin/true" # ERROR: Argument not valid here
  on_entry {
    count "c" {}
  }
}
