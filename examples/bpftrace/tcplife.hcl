# tcplife: TCP sessions, one event per session as it closes: who owned
# it, its two ends, the bytes sent and received, and how long it lived.
#
# A port of bpftrace's tools/tcplife.bt, on tcp_set_state(struct sock
# *sk, int state). Two tables keyed by the socket: "birth" keeps the time
# of the first state below TCP_FIN_WAIT1 (4); "owner" the pid and task
# name at TCP_SYN_SENT (2: the client connects) or TCP_LAST_ACK (9: the
# server closes after the client). At TCP_CLOSE (7) a socket that was
# born gets an owner from the current task if it has none yet (the
# actions run in order), then the event reads both tables and the keys
# are deleted. bytes_acked and bytes_received are struct tcp_sock's,
# read through the kernel's BTF. Addresses show as text, as tcplife.bt's
# ntop prints them (inet, inet6).
#
# Differs from tcplife.bt: IPv4 and IPv6 are two events.

table "birth" {
  max_keys = 65536
}

table "owner" {
  max_keys = 65536
}

probe "kernel" "set_state" {
  functions = ["tcp_set_state"]

  on_entry {
    store "birth" {
      when  = args.state < 4 && !has(birth, [args.sk])
      key   = [args.sk]
      value = ktime
    }
    store "owner" {
      when  = args.state == 2 || args.state == 9
      key   = [args.sk]
      value = { pid = pid, comm = comm }
    }
    store "owner" {
      when  = args.state == 7 && has(birth, [args.sk]) && !has(owner, [args.sk])
      key   = [args.sk]
      value = { pid = pid, comm = comm }
    }
    event "session" {
      when = args.state == 7 && has(birth, [args.sk]) && args.sk.__sk_common.skc_family == 2 # AF_INET
      fields = {
        pid   = owner[args.sk].pid
        comm  = owner[args.sk].comm
        laddr = inet(args.sk.__sk_common.skc_rcv_saddr)
        lport = args.sk.__sk_common.skc_num
        raddr = inet(args.sk.__sk_common.skc_daddr)
        rport = ntohs(args.sk.__sk_common.skc_dport)
        tx_kb = cast(args.sk, "struct tcp_sock").bytes_acked / 1024
        rx_kb = cast(args.sk, "struct tcp_sock").bytes_received / 1024
        ms    = (ktime - birth[args.sk]) / 1000000
      }
    }
    event "session_v6" {
      when = args.state == 7 && has(birth, [args.sk]) && args.sk.__sk_common.skc_family == 10 # AF_INET6
      fields = {
        pid   = owner[args.sk].pid
        comm  = owner[args.sk].comm
        laddr = inet6(args.sk.__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8)
        lport = args.sk.__sk_common.skc_num
        raddr = inet6(args.sk.__sk_common.skc_v6_daddr.in6_u.u6_addr8)
        rport = ntohs(args.sk.__sk_common.skc_dport)
        tx_kb = cast(args.sk, "struct tcp_sock").bytes_acked / 1024
        rx_kb = cast(args.sk, "struct tcp_sock").bytes_received / 1024
        ms    = (ktime - birth[args.sk]) / 1000000
      }
    }
    delete "birth" {
      when = args.state == 7
      key  = [args.sk]
    }
    delete "owner" {
      when = args.state == 7
      key  = [args.sk]
    }
  }
}
