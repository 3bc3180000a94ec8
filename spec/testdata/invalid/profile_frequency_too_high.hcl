# frequency above perf_event_max_sample_rate's default
probe "profile" "p" {
  frequency = 1000000 # ERROR: Number out of range
  on_entry {
    count "c" {}
  }
}
