# user_cast takes a pointer and a struct, as cast does
probe "tracepoint" "t" {
  event = "syscalls:sys_enter_nanosleep"
  on_entry {
    sum "a" {
      value = user_cast(args.rqtp).tv_sec # ERROR: Wrong number of arguments
    }
    sum "b" {
      value = user_cast(comm, "struct __kernel_timespec").tv_sec # ERROR: user_cast needs a pointer
    }
    sum "c" {
      value = user_cast(args.rqtp, "__kernel_timespec").tv_sec # ERROR: Expected a struct
    }
  }
}
