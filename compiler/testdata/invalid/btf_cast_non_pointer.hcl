# TARGET: linux-7.2-amd64
# BTF: host
probe "kernel" "x" {
  functions = ["vfs_read"]
  on_entry {
    count "c" {
      by = [cast(args.count, "struct sock").sk_type] # ERROR: cast needs a pointer
    }
  }
}
