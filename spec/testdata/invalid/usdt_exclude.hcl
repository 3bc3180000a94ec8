# exclude is for functions
probe "user" "u" {
  binary  = "/usr/bin/python3"
  usdt    = "python:function__entry"
  exclude = ["x"] # ERROR: Argument not valid here
  on_entry {
    count "c" {}
  }
}
