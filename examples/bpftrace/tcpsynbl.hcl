# tcpsynbl: the TCP SYN backlog, as a histogram of its length per backlog
# limit, from every SYN that completes a handshake (tcp_v4_syn_recv_sock
# and tcp_v6_syn_recv_sock, whose first argument is the listen socket).
#
# A port of bpftrace's tools/tcpsynbl.bt: sk_ack_backlog and
# sk_max_ack_backlog read from struct sock through the kernel's BTF.
# When the backlog is over its limit the SYN is dropped, and an event
# says so.
#
# Differs from tcpsynbl.bt: the "dropping a SYN" line is an event that
# carries the backlog and its limit; its time is the event's arrival.

probe "kernel" "syn_recv" {
  functions = ["tcp_v4_syn_recv_sock", "tcp_v6_syn_recv_sock"]

  on_entry {
    hist "backlog" {
      value = args.sk.sk_ack_backlog
      by    = [args.sk.sk_max_ack_backlog]
    }
    event "dropping_syn" {
      when   = args.sk.sk_ack_backlog > args.sk.sk_max_ack_backlog
      fields = { backlog = args.sk.sk_ack_backlog, limit = args.sk.sk_max_ack_backlog }
    }
  }
}
