# prefer takes "hits" or "attach"
probe "kernel" "x" {
  functions = ["vfs_read"]
  prefer    = "speed" # ERROR: Unknown preference
  on_entry {
    count "c" {}
  }
}
