# bad glob
probe "kernel" "x" {
  functions = ["ksys_["] # ERROR: Invalid function pattern
  on_entry {
    count "c" {}
  }
}
