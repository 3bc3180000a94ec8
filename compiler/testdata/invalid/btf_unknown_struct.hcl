# TARGET: linux-7.2-amd64
# BTF: host
probe "kernel" "x" {
  functions = ["tcp_connect"]
  on_entry {
    count "c" {
      by = [cast(arg0, "struct sokc").sk_type] # ERROR: Unknown struct
    }
  }
}
