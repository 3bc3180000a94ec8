# kaddr's symbol is a literal
probe "profile" "p" {
  period_ns = 10000000
  on_entry {
    max "m" { value = kernel_u64(kaddr(pid)) } # ERROR: Expected a kernel symbol
  }
}
