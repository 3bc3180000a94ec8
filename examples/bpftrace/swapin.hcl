# swapin: swap-ins by process; with `probectl run -interval 1s
# swapin.hcl`, per second.
#
# A port of bpftrace's tools/swapin.bt: swap_readpage (before 6.6) or
# swap_read_folio (from 6.6), whichever the kernel has, counted by comm
# and pid. Both are optional, as swapin.bt sets missing_probes = ignore.

probe "kernel" "swapin" {
  functions = [optional("swap_readpage"), optional("swap_read_folio")]

  on_entry {
    count "swapins" {
      by = [comm, pid]
    }
  }
}
