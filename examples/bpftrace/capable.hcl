# capable: security capability checks, one event per call of the kernel's
# cap_capable(): who needed which capability, by name.
#
# A port of bpftrace's tools/capable.bt. cap and opts are cap_capable's
# arguments, named by the kernel's BTF (capable.bt reads them as arg2 and
# arg3, and prints opts as AUDIT: CAP_OPT_NOAUDIT, 2, means the check is
# not audited). The capability shows by name through the labels block
# below (include/uapi/linux/capability.h, as capable.bt's own table); a
# number missing from it shows as the number.
#
# Linux 6.15 and later also have the capability:cap_capable tracepoint,
# with the same cap and the check's result (args.ret: errno_name shows
# EPERM): the host test applies this spec with the probe moved there.
#
# Differs from capable.bt: the time is the event's arrival, printed by
# probectl.

labels "capability" {
  values = {
    0  = "CAP_CHOWN"
    1  = "CAP_DAC_OVERRIDE"
    2  = "CAP_DAC_READ_SEARCH"
    3  = "CAP_FOWNER"
    4  = "CAP_FSETID"
    5  = "CAP_KILL"
    6  = "CAP_SETGID"
    7  = "CAP_SETUID"
    8  = "CAP_SETPCAP"
    9  = "CAP_LINUX_IMMUTABLE"
    10 = "CAP_NET_BIND_SERVICE"
    11 = "CAP_NET_BROADCAST"
    12 = "CAP_NET_ADMIN"
    13 = "CAP_NET_RAW"
    14 = "CAP_IPC_LOCK"
    15 = "CAP_IPC_OWNER"
    16 = "CAP_SYS_MODULE"
    17 = "CAP_SYS_RAWIO"
    18 = "CAP_SYS_CHROOT"
    19 = "CAP_SYS_PTRACE"
    20 = "CAP_SYS_PACCT"
    21 = "CAP_SYS_ADMIN"
    22 = "CAP_SYS_BOOT"
    23 = "CAP_SYS_NICE"
    24 = "CAP_SYS_RESOURCE"
    25 = "CAP_SYS_TIME"
    26 = "CAP_SYS_TTY_CONFIG"
    27 = "CAP_MKNOD"
    28 = "CAP_LEASE"
    29 = "CAP_AUDIT_WRITE"
    30 = "CAP_AUDIT_CONTROL"
    31 = "CAP_SETFCAP"
    32 = "CAP_MAC_OVERRIDE"
    33 = "CAP_MAC_ADMIN"
    34 = "CAP_SYSLOG"
    35 = "CAP_WAKE_ALARM"
    36 = "CAP_BLOCK_SUSPEND"
    37 = "CAP_AUDIT_READ"
    38 = "CAP_PERFMON"
    39 = "CAP_BPF"
    40 = "CAP_CHECKPOINT_RESTORE"
  }
}

probe "kernel" "cap_capable" {
  functions = ["cap_capable"]

  on_entry {
    event "capable" {
      fields = {
        uid  = uid
        pid  = pid
        comm = comm
        cap  = labels(capability, args.cap)
        opts = args.opts
      }
    }
  }
}
