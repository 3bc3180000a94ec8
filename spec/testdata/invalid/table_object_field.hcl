# a table of objects read without a field, and with one it lacks
table "t" {}

probe "tracepoint" "a" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    store "t" {
      key   = [tid]
      value = { ts = ktime, path = str(args.filename) }
    }
    sum "s" { value = t[tid] } # ERROR: Pick a field
    sum "u" { value = t[tid].size } # ERROR: Unknown table field
  }
}
