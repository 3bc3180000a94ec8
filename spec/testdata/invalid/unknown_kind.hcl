# unknown kind
probe "kernal" "x" { # ERROR: Unknown probe kind
  functions = ["vfs_read"]
  on_entry {
    count "c" {}
  }
}
