# functions in a profile probe
probe "profile" "p" {
  frequency = 99
  functions = ["vfs_read"] # ERROR: Argument not valid here
  on_entry {
    count "c" {}
  }
}
