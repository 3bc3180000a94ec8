# biolatency-kp: block I/O latency, as a histogram in microseconds: from
# the request's accounting start to its accounting end, through kernel
# functions.
#
# A port of bpftrace's tools/biolatency-kp.bt. A table keyed by the
# request (arg0, its struct request *) keeps when blk_account_io_start
# saw it; blk_account_io_done reads the time and deletes the key.
#
# As biolatency-kp.bt, it probes blk_account_io_start and
# __blk_account_io_start (and the same for done), each optional: older
# kernels have the __ names, and some builds inline both (Debian's 7.2),
# where the plan says the probes are skipped. biolatency.hcl, on
# tracepoints, works everywhere.

table "started" {
  max_keys = 65536
}

probe "kernel" "start" {
  functions = [optional("blk_account_io_start"), optional("__blk_account_io_start")]

  on_entry {
    store "started" {
      key   = [arg0]
      value = ktime
    }
  }
}

probe "kernel" "done" {
  functions = [optional("blk_account_io_done"), optional("__blk_account_io_done")]

  on_entry {
    hist "usecs" {
      when  = has(started, [arg0])
      value = (ktime - started[arg0]) / 1000
    }
    delete "started" {
      key = [arg0]
    }
  }
}
