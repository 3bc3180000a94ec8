# labels blocks: a valid, unique name; values an object of quoted names
labels "bad-name" { # ERROR: Invalid labels name
  values = { 1 = "ONE" }
}

labels "sig" {
  values = { 1 = "HUP" }
}

labels "sig" { # ERROR: Duplicate labels
  values = { 1 = "HUP" }
}

labels "names" {
  values = ["HUP", "INT"] # ERROR: Expected an object
}

labels "texts" {
  values = { 1 = 2 } # ERROR: Expected a name
}

probe "tracepoint" "t" {
  event = "syscalls:sys_enter_kill"
  on_entry {
    count "a" {
      by = [labels(sig, args.sig), labels(names, args.sig), labels(texts, args.sig)]
    }
    count "b" {
      by = [labels("sig", args.sig)] # ERROR: Expected a labels name
    }
    count "c" {
      max_keys = 1.5 # ERROR: Not a whole number
    }
  }
}
