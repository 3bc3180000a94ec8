# cpuwalk: which CPUs run tasks, sampled 99 times a second on every CPU, as
# bpftrace's tools/cpuwalk.bt counts them: a linear histogram of the CPU,
# for samples of a task (not the idle task, pid 0).

probe "profile" "cpuwalk" {
  frequency = 99

  on_entry {
    lhist "cpu" {
      when  = pid != 0
      value = cpu
      min   = 0
      max   = 1000
      step  = 1
    }
  }
}
