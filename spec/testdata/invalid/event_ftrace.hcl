# ftrace:* are the function tracer's records, not tracepoints
probe "tracepoint" "t" {
  event = "ftrace:function" # ERROR: Invalid tracepoint event
  on_entry {
    count "c" {}
  }
}
