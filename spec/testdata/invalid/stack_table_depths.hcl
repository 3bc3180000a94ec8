# a table of stacks stored at two depths
table "stacks" {}
probe "kernel" "t" {
  functions = ["vfs_read"]
  on_entry {
    store "stacks" {
      key   = [tid]
      value = kstack(10)
    }
  }
  on_exit {
    store "stacks" {
      key   = [tid]
      value = kstack # ERROR: Mismatched table types
    }
    count "c" {
      by = [stacks[tid]]
    }
  }
}
