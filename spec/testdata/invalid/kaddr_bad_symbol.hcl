# kaddr names a kernel symbol as kallsyms does
probe "profile" "p" {
  period_ns = 10000000
  one_cpu   = true
  on_entry {
    max "m" { value = kernel_u64(kaddr("aven run;")) } # ERROR: Invalid kernel symbol "aven run;"
  }
}
