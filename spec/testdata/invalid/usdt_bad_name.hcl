# usdt names a provider and a probe
probe "user" "u" {
  binary = "/usr/bin/python3"
  usdt   = "python.function__entry" # ERROR: Invalid USDT probe name
  on_entry {
    count "c" {}
  }
}
