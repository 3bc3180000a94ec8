# vfsstat: calls of key VFS functions, counted by function; with
# `probectl run -interval 1s vfsstat.hcl`, per second.
#
# A port of bpftrace's tools/vfsstat.bt: vfs_read*, vfs_write*, vfs_fsync,
# vfs_open and vfs_create, keyed by func. vfs_open and vfs_create are
# optional: a kernel that inlined one (or lacks it) attaches the others,
# and the plan says which matched nothing, as vfsstat.bt ignores missing
# probes. On fentry (Debian's 6.1) compiler copies (.isra.0) cannot be
# attached: exclude leaves them out.

probe "kernel" "vfs" {
  functions = ["vfs_read*", "vfs_write*", "vfs_fsync", optional("vfs_open"), optional("vfs_create")]
  exclude   = ["*.*"]

  on_entry {
    count "calls" {
      by = [func]
    }
  }
}
