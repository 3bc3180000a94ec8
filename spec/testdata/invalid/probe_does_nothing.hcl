# probe does nothing
probe "kernel" "x" { # ERROR: Probe does nothing
  functions = ["vfs_read"]
}
