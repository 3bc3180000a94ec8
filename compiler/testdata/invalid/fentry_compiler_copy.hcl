# TARGET: linux-6.1-amd64
# FUNCTIONS: lookup_fast.constprop.0 vfs_read vfs_statfs.part.0.isra.0 vfs_write
# attach = "auto" takes kprobes for copies (TestAutoCopiesTakeKprobes);
# a probe that insists on fentry is refused at the pattern.
probe "kernel" "vfs" {
  attach    = "fentry"
  functions = ["vfs_*"] # ERROR: Function has no BTF
  on_entry {
    count "c" {
      by = [func]
    }
  }
}

probe "kernel" "lookup" {
  attach    = "fentry"
  functions = ["vfs_read", "lookup_fast.constprop.0"] # ERROR: Function has no BTF
  on_entry {
    count "c" {}
  }
}

probe "kernel" "excluded" {
  attach    = "fentry"
  functions = ["vfs_*"]
  exclude   = ["*.*"]
  on_entry {
    count "c" {}
  }
}
