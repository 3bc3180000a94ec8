# tcpretrans: TCP retransmits, one event per retransmitted segment: the
# connection and its state.
#
# A port of bpftrace's tools/tcpretrans.bt: tcp_retransmit_skb(struct
# sock *sk, ...), the addresses, ports and state read from struct sock
# through the kernel's BTF. Addresses show as text, as tcpretrans.bt's
# ntop prints them (inet, inet6); lport is in host byte order already
# (skc_num). The state shows by name through the labels block below
# (include/net/tcp_states.h, as tcpretrans.bt's own table).
#
# Differs from tcpretrans.bt: an address and its port are two fields;
# IPv4 and IPv6 are two events. The time is the event's arrival.

labels "tcp_state" {
  values = {
    1  = "ESTABLISHED"
    2  = "SYN_SENT"
    3  = "SYN_RECV"
    4  = "FIN_WAIT1"
    5  = "FIN_WAIT2"
    6  = "TIME_WAIT"
    7  = "CLOSE"
    8  = "CLOSE_WAIT"
    9  = "LAST_ACK"
    10 = "LISTEN"
    11 = "CLOSING"
    12 = "NEW_SYN_RECV"
  }
}

probe "kernel" "retransmit" {
  functions = ["tcp_retransmit_skb"]

  on_entry {
    event "retransmit" {
      when = args.sk.__sk_common.skc_family == 2 # AF_INET
      fields = {
        pid   = pid
        laddr = inet(args.sk.__sk_common.skc_rcv_saddr)
        lport = args.sk.__sk_common.skc_num
        raddr = inet(args.sk.__sk_common.skc_daddr)
        rport = ntohs(args.sk.__sk_common.skc_dport)
        state = labels(tcp_state, args.sk.__sk_common.skc_state)
      }
    }
    event "retransmit_v6" {
      when = args.sk.__sk_common.skc_family == 10 # AF_INET6
      fields = {
        pid   = pid
        laddr = inet6(args.sk.__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8)
        lport = args.sk.__sk_common.skc_num
        raddr = inet6(args.sk.__sk_common.skc_v6_daddr.in6_u.u6_addr8)
        rport = ntohs(args.sk.__sk_common.skc_dport)
        state = labels(tcp_state, args.sk.__sk_common.skc_state)
      }
    }
  }
}
