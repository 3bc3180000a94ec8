# exits: processes exiting, by parent and exit status, like bpftrace's
# curtask->real_parent->tgid: ppid is the parent's pid (the current task's
# real_parent, through the kernel's BTF), and do_exit's code argument is
# named by its BTF (a long: the status is its second byte). Every thread
# of a process passes through do_exit; pid == tid keeps the main one.

probe "kernel" "exits" {
  functions = ["do_exit"]

  on_entry {
    when = pid == tid

    count "exits" {
      by = [ppid, comm, band(shr(args.code, 8), 255)]
    }
    event "exit" {
      fields = {
        pid    = pid
        ppid   = ppid
        parent = task.real_parent.comm
        status = band(shr(args.code, 8), 255)
      }
    }
  }
}
