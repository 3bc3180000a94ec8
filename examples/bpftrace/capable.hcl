# capable: security capability checks, as bpftrace's tools/capable.bt
# prints them, with the capability and the result by name: one event per
# check (who asked for which capability, and what the check said: 0 is
# granted, EPERM refused), and a count per task, capability and result.
#
# The capability:cap_capable tracepoint (Linux 6.15 and later) fires in
# cap_capable, which makes every capability check of the kernel, with its
# result. capable.bt probes the function itself (kprobe:cap_capable); on an
# older kernel, a kernel probe on cap_capable with args.cap does the same.
# The names are the labels block below (include/uapi/linux/capability.h);
# a number missing from it shows as the number.
#
# Differs from capable.bt: no audit column (the tracepoint has no opts),
# and the result is there.

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

probe "tracepoint" "capable" {
  event = "capability:cap_capable"

  on_entry {
    event "capable" {
      fields = {
        uid    = uid
        pid    = pid
        comm   = comm
        cap    = labels(capability, args.cap)
        result = errno_name(args.ret)
      }
    }
    count "checks" {
      by = {
        comm   = comm
        cap    = labels(capability, args.cap)
        result = errno_name(args.ret)
      }
    }
  }
}
