# unknown attach
probe "kernel" "x" {
  functions = ["vfs_read"]
  attach    = "kprobes" # ERROR: Unknown attach family
  on_entry {
    count "c" {}
  }
}
