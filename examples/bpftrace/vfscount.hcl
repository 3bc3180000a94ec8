# vfscount: calls of the kernel's VFS functions (vfs_*), counted by
# function.
#
# A port of bpftrace's tools/vfscount.bt: one probe on every function the
# glob vfs_* matches on the target, keyed by func (shown by name).
#
# Same as vfscount.bt, but for compiler copies (vfs_statfs.part.0.isra.0):
# where kernel functions are attached with fentry (no fprobe: Debian's
# 6.1) a copy has no BTF and cannot be attached, so exclude leaves them
# out everywhere, and the counts are those of the functions as written.
# vfs_statfs too: Debian's 6.12 on arm64 (fentry) refuses it ("not
# supported"), alone of its 76 vfs_* functions; the matrix test that
# applies every example found it.
# Against a profile the glob stays unresolved (a profile has no function
# list): plan against the live kernel or a facts file to see the
# functions.

probe "kernel" "vfs" {
  functions = ["vfs_*"]
  exclude   = ["*.*", "vfs_statfs"]

  on_entry {
    count "calls" {
      by = [func]
    }
  }
}
