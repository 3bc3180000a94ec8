# gethostlatency: host name lookups through libc, one event per call as
# it returns: who asked for which host, and how long it took in
# milliseconds.
#
# A port of bpftrace's tools/gethostlatency.bt: uprobes on libc's
# getaddrinfo, gethostbyname (and _r, 2, 2_r), which save the time and
# the name (their first argument, read from the caller's memory) for the
# exit; and on gethostbyaddr (and _r).
#
# Differs from gethostlatency.bt: libc is named by its path (Debian's, on
# x86-64; on arm64 it is /lib/aarch64-linux-gnu/libc.so.6), and the time
# is the event's arrival. For gethostbyaddr, addr is the first argument
# as a number: the pointer to the address, which gethostlatency.bt also
# prints as it is (ntop of an integer formats the pointer's low 32 bits,
# not the address it points to).

probe "user" "by_name" {
  binary    = "/lib/x86_64-linux-gnu/libc.so.6"
  functions = ["getaddrinfo", "gethostbyname", "gethostbyname_r", "gethostbyname2", "gethostbyname2_r"]

  on_entry {
    save = { start = ktime, host = str(arg0) }
  }

  on_exit {
    event "lookup" {
      fields = {
        pid  = pid
        comm = comm
        ms   = (ktime - entry.start) / 1000000
        host = entry.host
      }
    }
  }
}

probe "user" "by_addr" {
  binary    = "/lib/x86_64-linux-gnu/libc.so.6"
  functions = ["gethostbyaddr", "gethostbyaddr_r"]

  on_entry {
    save = { start = ktime, addr = arg0 }
  }

  on_exit {
    event "lookup_addr" {
      fields = {
        pid  = pid
        comm = comm
        ms   = (ktime - entry.start) / 1000000
        addr = entry.addr
      }
    }
  }
}
