# frequency 0
probe "profile" "p" {
  frequency = 0 # ERROR: Number out of range
  on_entry {
    count "c" {}
  }
}
