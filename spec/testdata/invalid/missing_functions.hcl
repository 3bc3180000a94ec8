# missing functions
probe "kernel" "x" { # ERROR: Missing required argument
  on_entry {
    count "c" {}
  }
}
