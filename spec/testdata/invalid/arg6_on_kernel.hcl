# arg6 and above are not a kernel function's
probe "kernel" "k" {
  functions = ["vfs_read"]
  on_entry {
    sum "s" { value = arg7 } # ERROR: arg7 is for USDT probes
  }
}
