# ret in a profile probe
probe "profile" "p" {
  frequency = 99
  on_entry {
    count "c" {
      when = ret < 0 # ERROR: ret is not available
    }
  }
}
