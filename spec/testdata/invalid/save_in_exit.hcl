# save in exit
probe "kernel" "x" {
  functions = ["vfs_read"]
  on_exit {
    save = { r = ret } # ERROR: save is only for on_entry
    count "c" {}
  }
}
