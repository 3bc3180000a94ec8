# ret in entry
probe "kernel" "x" {
  functions = ["vfs_read"]
  on_entry {
    count "c" {
      when = ret < 0 # ERROR: ret is only for on_exit
    }
  }
}
