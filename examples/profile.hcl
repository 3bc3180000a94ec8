# A CPU profile: every CPU sampled 99 times a second, each sample counted
# by the task, its user stack and its kernel stack. show prints the stacks
# symbolized; show -flamegraph profile.svg draws them, show -folded writes
# them for flamegraph.pl.
#
# event = "auto" (the default) samples the hardware cycle counter where the
# machine has one that samples, else the cpu-clock timer (VMs often have
# no PMU); plan says which, and why.

probe "profile" "cpu" {
  frequency = 99

  on_entry {
    count "samples" {
      by = [comm, ustack, kstack]
    }
  }
}
