# vfscount: calls of the kernel's VFS functions (vfs_*), counted by
# function.
#
# A port of bpftrace's tools/vfscount.bt: one probe on every function the
# glob vfs_* matches on the target, keyed by func (shown by name).
#
# Same as vfscount.bt. Against a profile the glob stays unresolved (a
# profile has no function list): plan against the live kernel or a facts
# file to see the functions. Where kernel functions are attached with
# fentry (no fprobe: Debian's 6.1), compiler copies such as
# vfs_statfs.part.0.isra.0 cannot be: the plan says so, and
# exclude = ["*.*"] leaves them out.

probe "kernel" "vfs" {
  functions = ["vfs_*"]

  on_entry {
    count "calls" {
      by = [func]
    }
  }
}
