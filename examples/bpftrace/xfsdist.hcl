# xfsdist: XFS operation latency, as a histogram in microseconds per
# operation: reads, writes, opens and fsyncs.
#
# A port of bpftrace's tools/xfsdist.bt: the entry of each of XFS's file
# operations saves the time, and its exit adds the latency to the
# histogram of its function.
#
# Same as xfsdist.bt, on a kernel with XFS (built in or its module
# loaded). xfsdist.bt ignores functions the kernel lacks; here a missing
# function is an error in the plan.

probe "kernel" "xfs" {
  functions = ["xfs_file_read_iter", "xfs_file_write_iter", "xfs_file_open", "xfs_file_fsync"]

  on_entry {
    save = { start = ktime }
  }

  on_exit {
    hist "us" {
      value = (ktime - entry.start) / 1000
      by    = [func]
    }
  }
}
