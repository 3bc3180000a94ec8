# kernel_u64 reads at an address
probe "profile" "p" {
  period_ns = 10000000
  on_entry {
    max "m" { value = kernel_u64(comm) } # ERROR: kernel_u64 needs an address
  }
}
