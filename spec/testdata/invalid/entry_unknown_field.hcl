# entry unknown field
probe "kernel" "x" {
  functions = ["vfs_read"]
  on_entry {
    save = { start = ktime }
  }
  on_exit {
    hist "h" {
      value = ktime - entry.begin # ERROR: Unknown entry value
    }
  }
}
