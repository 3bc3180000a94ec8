# biolatency: block I/O latency, as a histogram in microseconds: from the
# bio's queueing to the request's completion.
#
# A port of bpftrace's tools/biolatency.bt. A table keyed by the starting
# sector keeps when each bio was queued; the completion of a request (or of
# a bio, for drivers that complete bios) at that sector reads the time and
# deletes it.
#
# Same as biolatency.bt, keyed by sector alone as it is: the device is not
# part of the key because block_bio_queue names a partition's device while
# block_rq_complete names the whole disk's, with the sector already moved
# to the disk's numbering. I/O at one sector on two disks at once is
# counted once.
#
# As in bpftrace, a completion runs in an interrupt, and when it
# interrupts another BPF program the kernel skips the probe: status counts
# those runs as missed, and the bio's time stays in the table until its
# sector is queued again.

table "queued_at" {
  max_keys = 65536
}

probe "tracepoint" "queue" {
  event = "block:block_bio_queue"

  on_entry {
    store "queued_at" {
      key   = [args.sector]
      value = ktime
    }
  }
}

probe "tracepoint" "complete" {
  event = ["block:block_rq_complete", "block:block_bio_complete"]

  on_entry {
    hist "usecs" {
      when  = has(queued_at, [args.sector])
      value = (ktime - queued_at[args.sector]) / 1000
    }
    delete "queued_at" {
      key = [args.sector]
    }
  }
}
