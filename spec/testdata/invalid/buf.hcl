# buf takes a pointer and a length, both integers
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_write"
  on_entry {
    event "a" {
      fields = { b = buf(args.buf) } # ERROR: Wrong number of arguments
    }
    event "b" {
      fields = { b = buf(comm, 4) } # ERROR: buf needs a pointer
    }
    event "c" {
      fields = { b = buf(args.buf, comm) } # ERROR: buf needs a length
    }
  }
}

table "saved" {
}

probe "tracepoint" "s" {
  event = "syscalls:sys_enter_read"
  on_entry {
    store "saved" {
      key   = [tid]
      value = buf(args.buf, 8) # ERROR: Table cannot hold this
    }
  }
}
