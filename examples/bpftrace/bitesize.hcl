# bitesize: block I/O sizes, as a histogram in bytes per process name.
#
# A port of bpftrace's tools/bitesize.bt: the block_rq_issue tracepoint,
# keyed by the task name the tracepoint records (args.comm) with the
# request's size (args.bytes).
#
# Same as bitesize.bt. A flush request carries no data: it is the
# histogram's 0 bucket.

probe "tracepoint" "issue" {
  event = "block:block_rq_issue"

  on_entry {
    hist "bytes" {
      value = args.bytes
      by    = [args.comm]
    }
  }
}
