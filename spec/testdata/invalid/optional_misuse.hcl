# optional marks what is probed, with one name; the probe's optional is a bool
probe "kernel" "k" {
  functions = ["vfs_read", optional("vfs_fsync", "x")] # ERROR: Wrong number of arguments
  exclude   = [optional("vfs_write")] # ERROR: optional is for what is probed
  optional  = "yes" # ERROR: Expected true or false
  on_entry {
    count "c" {}
  }
}
