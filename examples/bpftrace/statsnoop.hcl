# statsnoop: stat(2) and friends, one event per call as it returns: who
# asked about which path, and the errno (0: it exists).
#
# A port of bpftrace's tools/statsnoop.bt. Two entry probes (statfs names
# its path "pathname", the others "filename") keep the path's pointer in
# one table keyed by thread ID; the exit probe reads the string, emits the
# event and deletes the key.
#
# Differs from statsnoop.bt: newfstatat is traced too. glibc's stat(),
# lstat() and fstatat() use it on x86-64 since glibc 2.33 (and always on
# arm64), so statsnoop.bt misses most stat calls of today's programs;
# glibc's fstat() is newfstatat of an empty path (AT_EMPTY_PATH), shown as
# such. The event says which system call it was. stat and lstat exist on
# x86-64 only: for arm64 (plan -target linux-7.2-arm64), newstat and
# newlstat are errors that say so; remove them from both lists.

table "filename" {
  max_keys = 10240
}

probe "tracepoint" "statfs_enter" {
  event = "syscalls:sys_enter_statfs"

  on_entry {
    store "filename" {
      key   = [tid]
      value = args.pathname
    }
  }
}

probe "tracepoint" "stat_enter" {
  event = ["syscalls:sys_enter_statx", "syscalls:sys_enter_newstat", "syscalls:sys_enter_newlstat", "syscalls:sys_enter_newfstatat"]

  on_entry {
    store "filename" {
      key   = [tid]
      value = args.filename
    }
  }
}

probe "tracepoint" "stat_exit" {
  event = ["syscalls:sys_exit_statfs", "syscalls:sys_exit_statx", "syscalls:sys_exit_newstat", "syscalls:sys_exit_newlstat", "syscalls:sys_exit_newfstatat"]

  on_entry {
    event "stat" {
      when = has(filename, [tid])
      fields = {
        pid     = pid
        comm    = comm
        syscall = event
        err     = args.ret >= 0 ? 0 : -args.ret
        path    = str(filename[tid], 256)
      }
    }
    delete "filename" {
      key = [tid]
    }
  }
}
