# a string literal as a table's value is one error: not also an unknown
# type at its store and at every read
table "who" {}
probe "tracepoint" "a" {
  event = "sched:sched_switch"
  on_entry {
    store "who" {
      key   = [tid]
      value = "switched" # ERROR: Table cannot hold this
    }
  }
}
probe "tracepoint" "b" {
  event = "sched:sched_wakeup"
  on_entry {
    count "n" { by = [who[tid]] }
  }
}
