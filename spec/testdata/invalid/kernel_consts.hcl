# enum_value and offsetof take quoted names the kernel's BTF can have
probe "tracepoint" "t" {
  event = "skb:kfree_skb"
  on_entry {
    sum "a" {
      value = enum_value(3) # ERROR: Expected an enumerator
    }
    sum "b" {
      value = enum_value("SKB DROP") # ERROR: Expected an enumerator
    }
    sum "c" {
      value = offsetof("mount", "mnt") # ERROR: Expected a struct
    }
    sum "d" {
      value = offsetof("struct mount", "mnt..mnt_root") # ERROR: Expected a member
    }
    sum "e" {
      value = offsetof("struct mount") # ERROR: Wrong number of arguments
    }
  }
}
