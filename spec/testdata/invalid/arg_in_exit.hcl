# arg in exit
probe "kernel" "x" {
  functions = ["vfs_read"]
  on_exit {
    count "c" {
      by = [arg1] # ERROR: Arguments are gone in on_exit
    }
  }
}
