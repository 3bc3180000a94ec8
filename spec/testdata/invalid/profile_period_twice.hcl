# a frequency and a count period
probe "profile" "p" {
  event     = "context-switches"
  frequency = 99
  period    = 1000 # ERROR: Sampling rate given twice
  on_entry {
    count "c" {}
  }
}
