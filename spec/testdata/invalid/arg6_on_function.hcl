# arg6 and above are a USDT probe's
probe "user" "u" {
  binary    = "/usr/bin/python3"
  functions = ["main"]
  on_entry {
    sum "s" { value = arg6 } # ERROR: arg6 is for USDT probes
  }
}
