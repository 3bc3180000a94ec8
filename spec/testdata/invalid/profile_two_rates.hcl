# frequency and period_ns both
probe "profile" "p" {
  frequency = 99
  period_ns = 1000000 # ERROR: Sampling rate given twice
  on_entry {
    count "c" {}
  }
}
