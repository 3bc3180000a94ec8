# bashreadline: the command lines typed into every interactive bash, one
# event per line, as readline() returns it.
#
# A port of bpftrace's tools/bashreadline.bt: a uretprobe on /bin/bash's
# readline, reading the returned string (from the process's memory).
#
# Differs from bashreadline.bt: only /bin/bash is probed (bpftrace also
# probes libreadline, for shells linked against it: add a second probe
# with binary = "libreadline"), and the time is the event's arrival, printed by
# probectl. A line is read up to 256 bytes.

probe "user" "readline" {
  binary    = "/bin/bash"
  functions = ["readline"]

  on_exit {
    event "line" {
      when   = comm == "bash"
      fields = { pid = pid, line = str(ret, 256) }
    }
  }
}
