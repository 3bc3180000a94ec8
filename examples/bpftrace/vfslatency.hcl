# vfslatency: read and write latency per file name. The name is read at
# entry from the file being read or written, through the kernel's BTF
# (struct file -> f_path.dentry -> d_name.name, a const unsigned char *
# that str() reads), and saved for the exit with the start time.

probe "kernel" "vfs_latency_by_file" {
  functions = ["vfs_read", "vfs_write"]

  on_entry {
    save = {
      file  = str(args.file.f_path.dentry.d_name.name)
      start = ktime
    }
  }

  on_exit {
    hist "latency_ns" {
      value = ktime - entry.start
      by    = [func, entry.file]
    }
    sum "bytes" {
      when  = ret > 0
      value = ret
      by    = [func, entry.file]
    }
  }
}
