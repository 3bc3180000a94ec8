# max - min overflows int64: the bucket count is computed without overflow
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    lhist "l" {
      value = args.count
      min   = -4611686018427387904
      max   = 4611686018427387904
      step  = 1 # ERROR: Too many lhist buckets
    }
  }
}
