# tcpconnlat: TCP connection latency, as bcc's tools/tcpconnlat measures
# it (bpftrace's tools have no tcpconnlat): a table joins two kernel
# functions by the socket. The time is stored when tcp_connect sends the
# SYN, read when the SYN-ACK reaches tcp_rcv_state_process while the
# socket is still in SYN_SENT, and the entry deleted. skc_state is a
# volatile unsigned char, read through BTF. The comm is the connecting
# process's, kept with the time as bcc does: the SYN-ACK is processed in
# a softirq, in whatever task the CPU runs then (often ksoftirqd).

table "connect_start" {
  max_keys = 65536
}

probe "kernel" "syn_sent" {
  functions = ["tcp_connect"]

  on_entry {
    store "connect_start" {
      key   = [args.sk]
      value = { start = ktime, comm = comm }
    }
  }
}

probe "kernel" "syn_acked" {
  functions = ["tcp_rcv_state_process"]

  on_entry {
    hist "connect_latency_us" {
      when  = has(connect_start, [args.sk]) && args.sk.__sk_common.skc_state == 2 # TCP_SYN_SENT
      value = (ktime - connect_start[args.sk].start) / 1000
      by    = { comm = connect_start[args.sk].comm }
    }
    delete "connect_start" {
      when = args.sk.__sk_common.skc_state == 2
      key  = [args.sk]
    }
  }
}
