# one_cpu is true or false
probe "profile" "p" {
  period_ns = 10000000
  one_cpu   = 1 # ERROR: Expected true or false
  on_entry {
    count "c" {}
  }
}
