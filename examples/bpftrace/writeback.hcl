# writeback: file system writeback, one event per writeback as it ends:
# the device, the pages written, the reason and how long it took.
#
# A port of bpftrace's tools/writeback.bt. A table keyed by the super
# block's device keeps when writeback_start fired; writeback_written reads
# and deletes it. pages is nr_pages & 0xffff, as writeback.bt prints it.
#
# Differs from writeback.bt: the reason is its number (enum wb_reason:
# 0 background, 1 vmscan, 2 sync, 3 periodic, ...; the tracepoint's
# format file lists them), where writeback.bt names it from a table of
# its own, and the latency is in microseconds; the time is the event's
# arrival, printed by probectl.

table "started" {
  max_keys = 10240
}

probe "tracepoint" "start" {
  event = "writeback:writeback_start"

  on_entry {
    store "started" {
      key   = [args.sb_dev]
      value = ktime
    }
  }
}

probe "tracepoint" "written" {
  event = "writeback:writeback_written"

  on_entry {
    event "writeback" {
      when = has(started, [args.sb_dev])
      fields = {
        device = args.name
        pages  = band(args.nr_pages, 65535)
        reason = args.reason
        us     = (ktime - started[args.sb_dev]) / 1000
      }
    }
    delete "started" {
      key = [args.sb_dev]
    }
  }
}
