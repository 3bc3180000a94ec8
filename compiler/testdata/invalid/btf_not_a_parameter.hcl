# TARGET: linux-7.2-amd64
# BTF: host
probe "kernel" "x" {
  functions = ["vfs_read"]
  on_entry {
    sum "bytes" {
      value = args.size # ERROR: Not a parameter
    }
  }
}
