# an event profile probes do not sample
probe "profile" "p" {
  frequency = 99
  event     = "instructions" # ERROR: Unknown profile event
  on_entry {
    count "c" {}
  }
}
