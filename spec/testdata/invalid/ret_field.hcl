# fields of ret, which is an integer (cast it)
probe "kernel" "k" {
  functions = ["inet_csk_accept"]
  on_exit {
    count "c" {
      by = [ret.__sk_common.skc_family] # ERROR: Unsupported traversal
    }
  }
}
