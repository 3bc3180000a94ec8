# a USDT probe has no exit
probe "user" "u" {
  binary = "/usr/bin/python3"
  usdt   = "python:function__entry"
  on_exit { # ERROR: USDT probes have no exit
    count "c" {}
  }
}
