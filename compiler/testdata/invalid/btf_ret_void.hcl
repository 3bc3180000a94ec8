# TARGET: linux-7.2-amd64
# BTF: host
# fput returns void: there is no ret to read.
probe "kernel" "x" {
  functions = ["fput"]
  on_exit {
    count "c" {
      by = [ret] # ERROR: ret has no value
    }
  }
}
