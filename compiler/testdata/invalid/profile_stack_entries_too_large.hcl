# TARGET: linux-7.2-amd64
# stack maps beyond what a probe may take when all are stored: 200000
# user and kernel stacks of 127 frames (an eighth of them deep) are
# 635 MiB in kmalloc slabs
probe "profile" "p" {
  frequency = 99
  stack_entries = 200000 # ERROR: Stack maps too large
  on_entry {
    count "c" {
      by = [ustack, kstack]
    }
  }
}
