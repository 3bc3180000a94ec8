# TARGET: linux-7.2-amd64
# each operand nested on the right keeps its left side on the stack
probe "tracepoint" "deep" {
  event = "syscalls:sys_enter_getppid"
  on_entry {
    count "before" {}
    sum "s" {
      value = pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid + (pid)))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))) # ERROR: Too much stack
    }
  }
}
