# prefer chooses the family by cost; attach names it: one or the other
probe "kernel" "x" {
  functions = ["vfs_*"]
  attach    = "kprobe.multi"
  prefer    = "hits" # ERROR: Conflicting route settings
  on_entry {
    count "c" {}
  }
}
