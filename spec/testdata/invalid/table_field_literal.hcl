# a string literal as a field of a table's objects is one error: the
# stores do not also disagree
table "who" {}
probe "tracepoint" "a" {
  event = "sched:sched_switch"
  on_entry {
    store "who" {
      key   = [tid]
      value = { what = "switched" } # ERROR: Field cannot hold this
    }
  }
}
probe "tracepoint" "c" {
  event = "sched:sched_process_exec"
  on_entry {
    store "who" {
      key   = [tid]
      value = { what = comm }
    }
    store "who" {
      key   = [pid]
      value = "exec" # ERROR: Expected an object
    }
  }
}
probe "tracepoint" "b" {
  event = "sched:sched_wakeup"
  on_entry {
    count "n" { by = [who[tid].what] }
  }
}
