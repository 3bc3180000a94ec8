# a USDT probe is a user probe
probe "usdt" "u" { # ERROR: Unknown probe kind
  binary = "/usr/bin/python3"
  on_entry {
    count "c" {}
  }
}
