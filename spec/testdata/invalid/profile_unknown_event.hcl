# an event profile probes do not sample (a misspelt software event)
probe "profile" "p" {
  period = 100
  event  = "page-fault" # ERROR: Unknown profile event
  on_entry {
    count "c" {}
  }
}
