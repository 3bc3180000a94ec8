# stack_entries below the 64 a stack map holds at least
probe "profile" "p" {
  frequency = 99
  stack_entries = 8 # ERROR: Number out of range
  on_entry {
    count "c" {
      by = [ustack]
    }
  }
}
