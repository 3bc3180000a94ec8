# TARGET: linux-7.2-amd64
# an event record is built on the stack: 8 + 32 * 16 bytes do not fit in 512
probe "tracepoint" "wide" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    event "e" { # ERROR: Too much stack
      fields = { c1 = comm, c2 = comm, c3 = comm, c4 = comm, c5 = comm, c6 = comm, c7 = comm, c8 = comm, c9 = comm, c10 = comm, c11 = comm, c12 = comm, c13 = comm, c14 = comm, c15 = comm, c16 = comm, c17 = comm, c18 = comm, c19 = comm, c20 = comm, c21 = comm, c22 = comm, c23 = comm, c24 = comm, c25 = comm, c26 = comm, c27 = comm, c28 = comm, c29 = comm, c30 = comm, c31 = comm, c32 = comm }
    }
  }
}
