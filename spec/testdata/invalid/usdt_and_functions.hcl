# usdt or functions, not both
probe "user" "u" {
  binary    = "/usr/bin/python3"
  functions = ["main"]
  usdt      = "python:function__entry" # ERROR: Conflicting arguments
  on_entry {
    count "c" {}
  }
}
