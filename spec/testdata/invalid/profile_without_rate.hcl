# a profile probe that does not say how often
probe "profile" "p" { # ERROR: Missing required argument
  on_entry {
    count "c" {}
  }
}
