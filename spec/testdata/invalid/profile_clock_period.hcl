# period (a count of occurrences) on the CPU clock, which counts time
probe "profile" "p" {
  event  = "cpu-clock"
  period = 1000 # ERROR: Period of a clock event
  on_entry {
    count "c" {}
  }
}
