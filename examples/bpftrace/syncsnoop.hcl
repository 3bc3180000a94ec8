# syncsnoop: calls of the sync family, one event per call as it enters:
# who asked for their data to reach the disk, and how.
#
# A port of bpftrace's tools/syncsnoop.bt: the entry of sync, syncfs,
# fsync, fdatasync, sync_file_range (and its variants) and msync.
#
# Differs from syncsnoop.bt: the time is the event's arrival, printed by
# probectl; the system call is the tracepoint's name, as syncsnoop.bt's
# probe builtin gives it.

probe "tracepoint" "sync" {
  event = [
    "syscalls:sys_enter_sync",
    "syscalls:sys_enter_syncfs",
    "syscalls:sys_enter_fsync",
    "syscalls:sys_enter_fdatasync",
    "syscalls:sys_enter_sync_file_range*",
    "syscalls:sys_enter_msync",
  ]

  on_entry {
    event "sync" {
      fields = { pid = pid, comm = comm, syscall = event }
    }
  }
}
