# event (the value) in a profile probe
probe "profile" "p" {
  frequency = 99
  on_entry {
    count "c" {
      by = [event] # ERROR: event is for tracepoints
    }
  }
}
