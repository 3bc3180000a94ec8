# labels blocks: numbers to printable names, each once, used by name
labels "sig" {
  values = {
    1   = "HUP"
    1   = "HANGUP" # ERROR: Duplicate label
    two = "INT" # ERROR: Expected a number
    3   = "" # ERROR: Invalid label
  }
}

labels "pid" { # ERROR: Labels name taken
  values = { 1 = "init" }
}

probe "tracepoint" "t" {
  event = "syscalls:sys_enter_kill"
  on_entry {
    count "a" {
      by = { s = labels(sig, args.sig) }
    }
    count "b" {
      by = { s = labels(signals, args.sig) } # ERROR: Unknown labels
    }
    count "c" {
      by = { s = labels(sig, comm) } # ERROR: labels needs an integer
    }
  }
}
