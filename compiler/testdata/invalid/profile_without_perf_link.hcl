# TARGET: linux-7.2-amd64
# WITHOUT: perf_link
# a profile probe on a kernel that cannot link BPF to perf events
probe "profile" "p" { # ERROR: Cannot sample
  frequency = 99
  on_entry {
    count "c" {
      by = [kstack]
    }
  }
}
