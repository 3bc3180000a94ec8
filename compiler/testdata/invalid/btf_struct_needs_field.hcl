# TARGET: linux-7.2-amd64
# BTF: host
probe "kernel" "x" {
  functions = ["vfs_read"]
  on_entry {
    count "c" {
      by = [args.file.f_path] # ERROR: Pick a field
    }
  }
}
