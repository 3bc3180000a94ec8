# arg0 in a profile probe
probe "profile" "p" {
  frequency = 99
  on_entry {
    count "c" {
      by = [arg0] # ERROR: arg0 is not available
    }
  }
}
