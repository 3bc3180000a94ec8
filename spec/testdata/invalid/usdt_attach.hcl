# a USDT probe attaches by uprobes
probe "user" "u" {
  binary = "/usr/bin/python3"
  usdt   = "python:function__entry"
  attach = "uprobe.session" # ERROR: Attach family not available
  on_entry {
    count "c" {}
  }
}
