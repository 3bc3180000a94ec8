# capable: security capability checks, one event per call of the kernel's
# cap_capable(): who needed which capability.
#
# A port of bpftrace's tools/capable.bt. cap and opts are cap_capable's
# arguments, named by the kernel's BTF (capable.bt reads them as arg2 and
# arg3, and prints opts as AUDIT: CAP_OPT_NOAUDIT, 2, means the check is
# not audited).
#
# Differs from capable.bt: the capability is its number (capabilities(7):
# 0 CAP_CHOWN ... 21 CAP_SYS_ADMIN ... 40 CAP_CHECKPOINT_RESTORE), where
# capable.bt also names it from a table of its own; the time is the
# event's arrival, printed by probectl.

probe "kernel" "cap_capable" {
  functions = ["cap_capable"]

  on_entry {
    event "capable" {
      fields = {
        uid  = uid
        pid  = pid
        comm = comm
        cap  = args.cap
        opts = args.opts
      }
    }
  }
}
