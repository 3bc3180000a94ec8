# args on kernel
probe "kernel" "x" {
  functions = ["vfs_read"]
  on_entry {
    sum "s" {
      value = args.count # ERROR: args is only for tracepoints
    }
  }
}
