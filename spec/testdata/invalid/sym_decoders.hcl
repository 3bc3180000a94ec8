# ksym and usym name the function at an address: an integer, shown only
probe "user" "u" {
  binary    = "/bin/true"
  functions = ["main"]
  on_entry {
    count "a" {
      by = { fn = ksym(comm) } # ERROR: ksym needs an address
    }
    count "b" {
      by = { fn = usym(str(arg0)) } # ERROR: usym needs an address
    }
    count "c" {
      by = [usym(ustack)] # ERROR: usym needs an address
    }
    count "d" {
      by = [ksym(kstack(3))] # ERROR: ksym needs an address
    }
    count "e" {
      by = [usym(arg0, pid)] # ERROR: Wrong number of arguments
    }
    count "f" {
      by = [ksym()] # ERROR: Wrong number of arguments
    }
    count "g" {
      when = usym(arg0) == 0 # ERROR: Decoder used as a value
    }
    sum "h" {
      value = ksym(arg1) # ERROR: Decoder used as a value
    }
  }
}
