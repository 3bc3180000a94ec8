# tcpdrop: TCP packets the kernel drops, with the kernel stack that dropped
# them, as bpftrace's tools/tcpdrop.bt traces them: the skb:kfree_skb
# tracepoint, with a drop reason (Linux 5.17+) beyond
# SKB_DROP_REASON_NOT_SPECIFIED (2).
#
# Unlike tcpdrop.bt, which reads the socket through skb->sk, this port
# reads the packet's own headers through the kernel's BTF: a received
# packet no longer has its socket in skb->sk when TCP drops it (tcp_v4_rcv
# takes it), so the socket would miss every receive-side drop. It keeps
# IPv4 (ETH_P_IP, 0x0800: the tracepoint gives the protocol in host order)
# and IPv6 (ETH_P_IPV6, 0x86DD, without extension headers) packets whose
# protocol is TCP (6), and gives their ports.
#
# Each drop is an event (pid, comm, reason, ports, the stack); "drops"
# counts them by reason and stack, which show prints symbolized (show
# -folded or -flamegraph draws them).

probe "tracepoint" "tcpdrop" {
  event = "skb:kfree_skb"

  on_entry {
    when = args.reason > 2 && ((args.protocol == 2048 && cast(cast(args.skbaddr, "struct sk_buff").head + cast(args.skbaddr, "struct sk_buff").network_header, "struct iphdr").protocol == 6) || (args.protocol == 34525 && cast(cast(args.skbaddr, "struct sk_buff").head + cast(args.skbaddr, "struct sk_buff").network_header, "struct ipv6hdr").nexthdr == 6))

    count "drops" {
      by = [args.reason, kstack]
    }
    event "drop" {
      fields = {
        pid    = pid
        comm   = comm
        reason = args.reason
        sport  = ntohs(cast(cast(args.skbaddr, "struct sk_buff").head + cast(args.skbaddr, "struct sk_buff").transport_header, "struct tcphdr").source)
        dport  = ntohs(cast(cast(args.skbaddr, "struct sk_buff").head + cast(args.skbaddr, "struct sk_buff").transport_header, "struct tcphdr").dest)
        stack  = kstack
      }
    }
  }
}
