# biostacks: block I/O latency by the kernel stack that started the I/O,
# as bpftrace's tools/biostacks.bt measures it: from the bio's queueing
# (its stack is the submitter's: a file system's writeback, a read, direct
# I/O) to the completion of the request (or of the bio) at its sector.
#
# One probe on the three block tracepoints: a stack is an id in the stack
# map of the probe that takes it, so the table that keeps it between queue
# and completion is used by this probe alone (event says which tracepoint
# fired). As biolatency, keyed by sector alone: I/O at one sector on two
# disks at once is counted once. biostacks.bt starts at
# blk_account_io_start; block_bio_queue is a tracepoint every kernel has.

table "started" {
  max_keys = 65536
}

probe "tracepoint" "biostacks" {
  event = ["block:block_bio_queue", "block:block_rq_complete", "block:block_bio_complete"]

  on_entry {
    store "started" {
      when  = event == "block:block_bio_queue"
      key   = [args.sector]
      value = { stack = kstack, ts = ktime }
    }
    hist "usecs" {
      when  = event != "block:block_bio_queue" && has(started, [args.sector])
      by    = [started[args.sector].stack]
      value = (ktime - started[args.sector].ts) / 1000
    }
    delete "started" {
      when = event != "block:block_bio_queue"
      key  = [args.sector]
    }
  }
}
