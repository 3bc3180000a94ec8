# a user probe names functions or a USDT probe
probe "user" "u" { # ERROR: Missing required argument
  binary = "/usr/bin/python3"
  on_entry {
    count "c" {}
  }
}
