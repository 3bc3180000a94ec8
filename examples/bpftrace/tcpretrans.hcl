# tcpretrans: TCP retransmits, one event per retransmitted segment: the
# connection and its state.
#
# A port of bpftrace's tools/tcpretrans.bt: tcp_retransmit_skb(struct
# sock *sk, ...), the addresses, ports and state read from struct sock
# through the kernel's BTF. IPv4 addresses are turned to host byte order
# with ntohl (127.0.0.1 is 2130706433); IPv6 addresses are __u8[16]:
# bytes, shown in hex. lport is in host byte order already (skc_num).
#
# Differs from tcpretrans.bt: addresses are numbers or bytes, not text,
# and the state is its number (include/net/tcp_states.h: 1 ESTABLISHED,
# 2 SYN_SENT, ... 12 NEW_SYN_RECV), where tcpretrans.bt names it; IPv4
# and IPv6 are two events. The time is the event's arrival.

probe "kernel" "retransmit" {
  functions = ["tcp_retransmit_skb"]

  on_entry {
    event "retransmit" {
      when = args.sk.__sk_common.skc_family == 2 # AF_INET
      fields = {
        pid   = pid
        laddr = ntohl(args.sk.__sk_common.skc_rcv_saddr)
        lport = args.sk.__sk_common.skc_num
        raddr = ntohl(args.sk.__sk_common.skc_daddr)
        rport = ntohs(args.sk.__sk_common.skc_dport)
        state = args.sk.__sk_common.skc_state
      }
    }
    event "retransmit_v6" {
      when = args.sk.__sk_common.skc_family == 10 # AF_INET6
      fields = {
        pid   = pid
        laddr = args.sk.__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8
        lport = args.sk.__sk_common.skc_num
        raddr = args.sk.__sk_common.skc_v6_daddr.in6_u.u6_addr8
        rport = ntohs(args.sk.__sk_common.skc_dport)
        state = args.sk.__sk_common.skc_state
      }
    }
  }
}
