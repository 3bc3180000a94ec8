# entry never saved
probe "kernel" "x" {
  functions = ["vfs_read"]
  on_exit {
    hist "h" {
      value = ktime - entry.start # ERROR: Nothing saved on entry
    }
  }
}
