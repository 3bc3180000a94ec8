# no functions
probe "kernel" "x" {
  functions = [] # ERROR: No functions
  on_entry {
    count "c" {}
  }
}
