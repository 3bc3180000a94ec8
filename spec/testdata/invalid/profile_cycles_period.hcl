# cycles at a period in nanoseconds
probe "profile" "p" {
  event     = "cycles"
  period_ns = 1000000 # ERROR: Period of a cycle counter
  on_entry {
    count "c" {}
  }
}
