# bpftrace's names get what probectl calls them
probe "kernel" "t" {
  functions = ["vfs_read"]
  on_exit {
    sum "a" {
      value = nsecs # ERROR: Unknown name
    }
    sum "b" {
      value = retval # ERROR: Unknown name
    }
    sum "c" {
      value = avg(ret) # ERROR: Unknown function
    }
  }
}
