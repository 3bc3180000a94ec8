# sslsnoop: OpenSSL calls, one event per call as it returns: SSL_read,
# SSL_write and SSL_do_handshake in libssl, RSA_sign and RSA_verify in
# libcrypto, with the latency in microseconds and the return value.
#
# A port of bpftrace's tools/sslsnoop.bt: uprobes that save the time at
# entry, and an event at exit naming the function.
#
# Differs from sslsnoop.bt: the libraries are named by their paths
# (Debian's OpenSSL 3, on x86-64), and the time is the event's arrival
# where sslsnoop.bt prints microseconds since it started. sslsnoop.bt
# also lists libcrypto functions that only its debug symbols name
# (rsa_ossl_*, ossl_ecdsa_*, ossl_ecdh_compute_key) and ignores them when
# they are missing; Debian's libcrypto exports only RSA_sign and
# RSA_verify of those, so they are all that is probed here. ret is the
# whole register, as in sslsnoop.bt: an int's -1 may show as 4294967295.

probe "user" "ssl" {
  binary    = "/lib/x86_64-linux-gnu/libssl.so.3"
  functions = ["SSL_read", "SSL_write", "SSL_do_handshake"]

  on_entry {
    save = { start = ktime }
  }

  on_exit {
    event "ssl" {
      fields = {
        tid  = tid
        comm = comm
        us   = (ktime - entry.start) / 1000
        ret  = ret
        func = func
      }
    }
  }
}

probe "user" "crypto" {
  binary    = "/lib/x86_64-linux-gnu/libcrypto.so.3"
  functions = ["RSA_sign", "RSA_verify"]

  on_entry {
    save = { start = ktime }
  }

  on_exit {
    event "crypto" {
      fields = {
        tid  = tid
        comm = comm
        us   = (ktime - entry.start) / 1000
        ret  = ret
        func = func
      }
    }
  }
}
