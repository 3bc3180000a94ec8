# tcpconnect: outbound IPv4 TCP connections, as bpftrace's
# tools/tcpconnect.bt traces them. tcp_connect(struct sock *sk) runs once
# the destination is set; the addresses and ports are read from struct sock
# through the kernel's BTF, and turned to host byte order with ntohl and
# ntohs (127.0.0.1 is 2130706433).

probe "kernel" "tcpconnect" {
  functions = ["tcp_connect"]

  on_entry {
    when = args.sk.__sk_common.skc_family == 2 # AF_INET

    count "connections" {
      by = [comm, ntohl(args.sk.__sk_common.skc_daddr), ntohs(args.sk.__sk_common.skc_dport)]
    }
    event "connect" {
      fields = {
        pid   = pid
        comm  = comm
        saddr = ntohl(args.sk.__sk_common.skc_rcv_saddr)
        daddr = ntohl(args.sk.__sk_common.skc_daddr)
        dport = ntohs(args.sk.__sk_common.skc_dport)
      }
    }
  }
}
