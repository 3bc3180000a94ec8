# misspelled argument
probe "kernel" "x" {
  functons = ["vfs_read"] # ERROR: Unsupported argument
  on_entry {
    count "c" {}
  }
}
