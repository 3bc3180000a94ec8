# entry data too small
probe "kernel" "x" {
  functions       = ["vfs_read"]
  entry_data_size = 8 # ERROR: Entry data too small
  on_entry {
    save = { start = ktime, fd = arg0 }
  }
  on_exit {
    hist "h" { value = ktime - entry.start }
  }
}
