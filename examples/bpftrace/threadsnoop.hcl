# threadsnoop: new threads, one event per pthread_create call: who
# created a thread, and the function the thread starts in, by name.
#
# A port of bpftrace's tools/threadsnoop.bt: a uprobe on libc's
# pthread_create, whose third argument is the start routine; usym shows
# it as the function it points to (start_thread+0x0 shows as start_thread,
# with the file it is in: worker [myserver]).
#
# Differs from threadsnoop.bt: only libc is probed (glibc 2.34 moved
# pthread_create there from libpthread; for an older libc add a probe on
# "libpthread"), and the time is the event's arrival, printed by
# probectl. usym names the function while the creating process runs,
# which a process creating threads does; read the events after it has
# exited and the start routine shows as its address (see usym in the
# README).

probe "user" "pthread_create" {
  binary    = "libc"
  functions = ["pthread_create"]

  on_entry {
    event "thread" {
      fields = { pid = pid, comm = comm, func = usym(arg2) }
    }
  }
}
