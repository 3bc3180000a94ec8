# binary is an absolute path or a library's name as ld.so.cache lists it
probe "user" "u" {
  binary    = "lib c" # ERROR: Invalid library name
  functions = ["malloc"]
  on_entry {
    count "c" {}
  }
}
