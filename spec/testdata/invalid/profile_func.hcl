# func in a profile probe
probe "profile" "p" {
  frequency = 99
  on_entry {
    count "c" {
      by = [func] # ERROR: func is not available
    }
  }
}
