# prefer is for kernel probes
probe "user" "x" {
  binary    = "/bin/true"
  functions = ["main"]
  prefer    = "hits" # ERROR: Argument not valid here
  on_entry {
    count "c" {}
  }
}
