# tcpdrop: TCP packets the kernel drops, with the kernel stack that dropped
# them, as bpftrace's tools/tcpdrop.bt traces them: the skb:kfree_skb
# tracepoint with a drop reason (Linux 5.17+) beyond
# SKB_DROP_REASON_NOT_SPECIFIED (2), for skbs of an IPv4 (2) or IPv6 (10)
# socket, read through the kernel's BTF.
#
# Each drop is an event (pid, comm, reason, ports, the stack); "drops"
# counts them by reason and stack, which show prints symbolized (and
# show -folded or -flamegraph draws). The addresses are left out here.

probe "tracepoint" "tcpdrop" {
  event = "skb:kfree_skb"

  on_entry {
    when = args.reason > 2 && (cast(args.skbaddr, "struct sk_buff").sk.__sk_common.skc_family == 2 || cast(args.skbaddr, "struct sk_buff").sk.__sk_common.skc_family == 10)

    count "drops" {
      by = [args.reason, kstack]
    }
    event "drop" {
      fields = {
        pid    = pid
        comm   = comm
        reason = args.reason
        sport  = cast(args.skbaddr, "struct sk_buff").sk.__sk_common.skc_num
        dport  = ntohs(cast(args.skbaddr, "struct sk_buff").sk.__sk_common.skc_dport)
        stack  = kstack
      }
    }
  }
}
