# args in a profile probe
probe "profile" "p" {
  frequency = 99
  on_entry {
    count "c" {
      by = [args.fd] # ERROR: args is not available
    }
  }
}
