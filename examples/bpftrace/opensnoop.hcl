# opensnoop: open(2), openat(2) and openat2(2), one event per call as it
# returns: who opened which path, and the descriptor or the error.
#
# A port of bpftrace's tools/opensnoop.bt. The entry probe keeps the path's
# pointer in a table keyed by thread ID; the exit probe reads the string
# (the kernel has copied it in by then, so its page is present), emits the
# event and deletes the key. fd is -1 and err the errno when the call fails.
#
# cwd is the caller's working directory, its full path across mounts: what
# opensnoop.bt walks up through struct dentry and struct mount with BTF to
# print before a relative path (here a field of its own, beside the path as
# the caller gave it, up to 256 bytes). open(2) exists on x86-64 only: for arm64 (plan -target linux-7.2-arm64), sys_enter_open
# and sys_exit_open are errors that say so; remove them from both lists.

table "filename" {
  max_keys = 10240
}

probe "tracepoint" "open_enter" {
  event = ["syscalls:sys_enter_open", "syscalls:sys_enter_openat", "syscalls:sys_enter_openat2"]

  on_entry {
    store "filename" {
      key   = [tid]
      value = args.filename
    }
  }
}

probe "tracepoint" "open_exit" {
  event = ["syscalls:sys_exit_open", "syscalls:sys_exit_openat", "syscalls:sys_exit_openat2"]

  on_entry {
    event "open" {
      when = has(filename, [tid])
      fields = {
        pid  = pid
        comm = comm
        fd   = args.ret >= 0 ? args.ret : -1
        err  = args.ret >= 0 ? 0 : -args.ret
        cwd  = cwd
        path = str(filename[tid], 256)
      }
    }
    delete "filename" {
      key = [tid]
    }
  }
}
