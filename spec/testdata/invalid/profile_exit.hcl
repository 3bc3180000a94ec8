# on_exit in a profile probe
probe "profile" "p" {
  frequency = 99
  on_entry {
    count "c" {}
  }
  on_exit { # ERROR: Samples have no exit
    count "d" {}
  }
}
