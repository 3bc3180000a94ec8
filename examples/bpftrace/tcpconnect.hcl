# tcpconnect: outbound TCP connections, as bpftrace's tools/tcpconnect.bt
# traces them. tcp_connect(struct sock *sk) runs once the destination is
# set; the addresses and ports are read from struct sock through the
# kernel's BTF. Addresses show as text, as tcpconnect.bt's ntop prints
# them: inet (IPv4) and inet6 (IPv6, a __u8[16]) take them as the kernel
# stores them. dport is turned to host byte order with ntohs; sport is in
# host byte order already (skc_num).
#
# Differs from tcpconnect.bt: IPv4 and IPv6 are two events, and counts
# per destination come with them. The time is the event's arrival.

probe "kernel" "tcpconnect" {
  functions = ["tcp_connect"]

  on_entry {
    count "connections" {
      when = args.sk.__sk_common.skc_family == 2 # AF_INET
      by   = { comm = comm, daddr = inet(args.sk.__sk_common.skc_daddr), dport = ntohs(args.sk.__sk_common.skc_dport) }
    }
    count "connections_v6" {
      when = args.sk.__sk_common.skc_family == 10 # AF_INET6
      by   = { comm = comm, daddr = inet6(args.sk.__sk_common.skc_v6_daddr.in6_u.u6_addr8), dport = ntohs(args.sk.__sk_common.skc_dport) }
    }
    event "connect" {
      when = args.sk.__sk_common.skc_family == 2
      fields = {
        pid   = pid
        comm  = comm
        saddr = inet(args.sk.__sk_common.skc_rcv_saddr)
        sport = args.sk.__sk_common.skc_num
        daddr = inet(args.sk.__sk_common.skc_daddr)
        dport = ntohs(args.sk.__sk_common.skc_dport)
      }
    }
    event "connect_v6" {
      when = args.sk.__sk_common.skc_family == 10
      fields = {
        pid   = pid
        comm  = comm
        saddr = inet6(args.sk.__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8)
        sport = args.sk.__sk_common.skc_num
        daddr = inet6(args.sk.__sk_common.skc_v6_daddr.in6_u.u6_addr8)
        dport = ntohs(args.sk.__sk_common.skc_dport)
      }
    }
  }
}
