# relative binary
probe "user" "u" {
  binary    = "bin/app" # ERROR: Binary path must be absolute
  functions = ["main"]
  on_entry {
    count "c" {}
  }
}
