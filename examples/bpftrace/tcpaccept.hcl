# tcpaccept: TCP connections accepted, one event per accept as
# inet_csk_accept() returns the new socket: the remote and local ends
# and the listen backlog.
#
# A port of bpftrace's tools/tcpaccept.bt. The return value is the new
# struct sock * (NULL on error: every field then reads 0, and no event
# passes the family test); cast(ret, "struct sock") reads it through the
# kernel's BTF. Addresses show as text, as tcpaccept.bt's ntop prints
# them: inet (IPv4) and inet6 (IPv6) take them as the kernel stores them.
# qlen and qmax are the listen socket's backlog and its limit.
#
# Differs from tcpaccept.bt: IPv4 and IPv6 are two events. The time is
# the event's arrival.

probe "kernel" "accept" {
  functions = ["inet_csk_accept"]

  on_exit {
    event "accept" {
      when = cast(ret, "struct sock").__sk_common.skc_family == 2 # AF_INET
      fields = {
        pid   = pid
        comm  = comm
        raddr = inet(cast(ret, "struct sock").__sk_common.skc_daddr)
        rport = ntohs(cast(ret, "struct sock").__sk_common.skc_dport)
        laddr = inet(cast(ret, "struct sock").__sk_common.skc_rcv_saddr)
        lport = cast(ret, "struct sock").__sk_common.skc_num
        qlen  = cast(ret, "struct sock").sk_ack_backlog
        qmax  = cast(ret, "struct sock").sk_max_ack_backlog
      }
    }
    event "accept_v6" {
      when = cast(ret, "struct sock").__sk_common.skc_family == 10 # AF_INET6
      fields = {
        pid   = pid
        comm  = comm
        raddr = inet6(cast(ret, "struct sock").__sk_common.skc_v6_daddr.in6_u.u6_addr8)
        rport = ntohs(cast(ret, "struct sock").__sk_common.skc_dport)
        laddr = inet6(cast(ret, "struct sock").__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8)
        lport = cast(ret, "struct sock").__sk_common.skc_num
        qlen  = cast(ret, "struct sock").sk_ack_backlog
        qmax  = cast(ret, "struct sock").sk_max_ack_backlog
      }
    }
  }
}
