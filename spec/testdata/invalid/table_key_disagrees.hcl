# a read keyed by a string where the stores key by an integer
table "t" {}

probe "tracepoint" "a" {
  event = "syscalls:sys_enter_openat"
  on_entry {
    store "t" {
      key   = [tid]
      value = ktime
    }
    sum "s" { value = t[comm] } # ERROR: Mismatched table types
  }
}
