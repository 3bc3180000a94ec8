# dcsnoop: directory entry cache lookups, one event per lookup: a
# reference (lookup_fast, the cache's fast path) or a slow lookup
# (d_lookup), with the name looked up.
#
# A port of bpftrace's tools/dcsnoop.bt. lookup_fast takes a struct
# nameidata *, which the kernel does not export: cast(arg0, "struct
# nameidata") reads the name through the kernel's BTF (a compiler copy,
# lookup_fast.constprop.N, has no prototype in BTF, so arg0 it is).
# d_lookup's name (a struct qstr *) is read at entry and the event is
# sent as it returns, as dcsnoop.bt prints it.
#
# Differs from dcsnoop.bt: the two kinds are two events (dcsnoop.bt's T
# column, R or M), and the time is the event's arrival. The glob
# lookup_fast* takes whichever of lookup_fast and its constprop copy the
# kernel has; the plan names them.

probe "kernel" "lookup_fast" {
  functions = ["lookup_fast*"]

  on_entry {
    event "reference" {
      fields = {
        pid  = pid
        comm = comm
        file = str(cast(arg0, "struct nameidata").last.name)
      }
    }
  }
}

probe "kernel" "d_lookup" {
  functions = ["d_lookup"]

  on_entry {
    save = { name = str(args.name.name) }
  }

  on_exit {
    event "miss" {
      fields = { pid = pid, comm = comm, file = entry.name }
    }
  }
}
