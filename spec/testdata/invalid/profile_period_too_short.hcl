# a period shorter than the CPU clock's 10 µs
probe "profile" "p" {
  period_ns = 100 # ERROR: Number out of range
  on_entry {
    count "c" {}
  }
}
