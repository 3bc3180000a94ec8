# stack_entries belongs to profile probes
probe "kernel" "k" {
  functions = ["vfs_read"]
  stack_entries = 1024 # ERROR: Argument not valid here
  on_entry {
    count "c" {
      by = [kstack]
    }
  }
}
