# ssllatency: OpenSSL call latency, as linear histograms in microseconds
# (0 to 1000, steps of 200) and totals per function, apart for calls that
# succeed and calls that fail.
#
# A port of bpftrace's tools/ssllatency.bt: uprobes that save the time at
# entry; at exit, a call succeeded when the low byte of its return value,
# as a signed 8-bit number, is at least 1 (ssllatency.bt's
# (int8)retval >= 1): 1 to 127 in band(ret, 255).
#
# Differs from ssllatency.bt: its stats() (count, average, total) is a
# count and a sum here (the average is their quotient), and the libraries
# are named by their paths (Debian's OpenSSL 3, on x86-64). The libcrypto
# functions are in a probe of their own, and only those Debian's
# libcrypto exports (RSA_sign, RSA_verify): ssllatency.bt also lists
# functions only debug symbols name, and ignores them when missing.

probe "user" "ssl" {
  binary    = "/lib/x86_64-linux-gnu/libssl.so.3"
  functions = ["SSL_read", "SSL_write", "SSL_do_handshake"]

  on_entry {
    save = { start = ktime }
  }

  on_exit {
    lhist "us" {
      when  = band(ret, 255) >= 1 && band(ret, 255) <= 127
      value = (ktime - entry.start) / 1000
      min   = 0
      max   = 1000
      step  = 200
      by    = [func]
    }
    count "calls" {
      when = band(ret, 255) >= 1 && band(ret, 255) <= 127
      by   = [func]
    }
    sum "total_us" {
      when  = band(ret, 255) >= 1 && band(ret, 255) <= 127
      value = (ktime - entry.start) / 1000
      by    = [func]
    }
    lhist "us_failed" {
      when  = band(ret, 255) < 1 || band(ret, 255) > 127
      value = (ktime - entry.start) / 1000
      min   = 0
      max   = 1000
      step  = 200
      by    = [func]
    }
    count "calls_failed" {
      when = band(ret, 255) < 1 || band(ret, 255) > 127
      by   = [func]
    }
    sum "total_us_failed" {
      when  = band(ret, 255) < 1 || band(ret, 255) > 127
      value = (ktime - entry.start) / 1000
      by    = [func]
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
    lhist "us" {
      value = (ktime - entry.start) / 1000
      min   = 0
      max   = 1000
      step  = 200
      by    = [func]
    }
    count "calls" {
      by = [func]
    }
    sum "total_us" {
      value = (ktime - entry.start) / 1000
      by    = [func]
    }
  }
}
