# TARGET: linux-6.1-amd64
# FUNCTIONS: lookup_fast.constprop.0 vfs_read vfs_statfs.part.0.isra.0 vfs_write
# attach = "fentry" refuses compiler copies; auto takes kprobes for them
# (compiler's copiesOnKprobes).
probe "kernel" "vfs" {
  functions = ["vfs_*"] # ERROR: Function has no BTF
  attach    = "fentry"
  on_entry {
    count "c" {
      by = [func]
    }
  }
}

probe "kernel" "lookup" {
  functions = ["vfs_read", "lookup_fast.constprop.0"] # ERROR: Function has no BTF
  attach    = "fentry"
  on_entry {
    count "c" {}
  }
}

probe "kernel" "excluded" {
  functions = ["vfs_*"]
  exclude   = ["*.*"]
  on_entry {
    count "c" {}
  }
}
