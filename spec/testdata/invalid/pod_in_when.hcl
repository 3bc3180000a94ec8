# pod compared in when: the kernel has only the cgroup ID
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_read"
  on_entry {
    when = pod == "web-0" # ERROR: Pods are named when read
    count "c" { by = { pod = pod } }
  }
}
