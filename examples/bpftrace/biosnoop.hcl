# biosnoop: block I/O, one event per request as it completes: the disk,
# who issued it, and its latency in milliseconds.
#
# A port of bpftrace's tools/biosnoop.bt. A table keyed by device and
# sector keeps, for each request, when it started, and the pid and task
# name that started it; the completion at that device and sector reads
# them, emits the event and deletes the key. major and minor come from
# the dev_t (major: the bits above 20).
#
# Differs from biosnoop.bt: the event carries the completion time in
# milliseconds since boot (time_ms) where biosnoop.bt prints it since the
# tool started. block_io_start and block_io_done exist since Linux 6.5
# (bpftrace's tools/old has versions for older kernels).

table "started" {
  max_keys = 65536
}

probe "tracepoint" "start" {
  event = "block:block_io_start"

  on_entry {
    store "started" {
      key   = [args.dev, args.sector]
      value = { ts = ktime, pid = pid, comm = comm }
    }
  }
}

probe "tracepoint" "done" {
  event = "block:block_io_done"

  on_entry {
    event "io" {
      when = has(started, [args.dev, args.sector])
      fields = {
        time_ms = ktime / 1000000
        major   = shr(args.dev, 20)
        minor   = band(args.dev, 1048575)
        comm    = started[[args.dev, args.sector]].comm
        pid     = started[[args.dev, args.sector]].pid
        lat_ms  = (ktime - started[[args.dev, args.sector]].ts) / 1000000
      }
    }
    delete "started" {
      key = [args.dev, args.sector]
    }
  }
}
