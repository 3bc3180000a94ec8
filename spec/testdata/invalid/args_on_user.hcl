# args.NAME needs BTF: user functions have none
probe "user" "x" {
  binary    = "/bin/true"
  functions = ["main"]
  on_entry {
    sum "s" {
      value = args.count # ERROR: args.NAME needs BTF
    }
  }
}
