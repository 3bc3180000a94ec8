# Functions in a user binary: uprobe.multi where the kernel has it,
# return values with entry data, a pid filter field and events.

probe "user" "allocations" {
  binary    = "/lib/x86_64-linux-gnu/libc.so.6"
  functions = ["malloc", "calloc", "realloc"]

  on_entry {
    # malloc(size), calloc(n, size), realloc(ptr, size)
    save = { size = func == "calloc" ? arg0 * arg1 : (func == "malloc" ? arg0 : arg1) }
  }
  on_exit {
    hist "bytes" {
      value = entry.size
      by    = [func]
    }
    count "failed" {
      when = ret == 0
      by   = [comm]
    }
  }
}

probe "user" "frees" {
  binary    = "/lib/x86_64-linux-gnu/libc.so.6"
  functions = ["free"]
  attach    = "uprobe"
  pid       = 1

  on_entry {
    count "calls" {}
    event "null_free" {
      when   = arg0 == 0
      fields = { tid = tid, at = ktime }
    }
  }
}
