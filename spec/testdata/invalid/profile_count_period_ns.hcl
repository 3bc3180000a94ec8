# period_ns on an event that counts occurrences, not time
probe "profile" "p" {
  event     = "page-faults"
  period_ns = 1000000 # ERROR: Period of a counting event
  on_entry {
    count "c" {}
  }
}
