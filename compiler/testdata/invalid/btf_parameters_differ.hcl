# TARGET: linux-7.2-amd64
# BTF: host
# vfs_read's buf is a char *, kernel_read's a void *.
probe "kernel" "x" {
  functions = ["vfs_read", "kernel_read"]
  on_entry {
    count "c" {
      by = [args.count, args.buf] # ERROR: Parameters differ
    }
  }
}
