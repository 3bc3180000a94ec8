package spec

// The task's working directory (the built-in value cwd): the compiler walks
// task.fs.pwd from its dentry up to the root, crossing mounts, in a loop
// bounded by CwdDepth, and writes the names it passes, leaf first, each
// ended by a NUL, into CwdSize bytes; the reader reverses them into a path.

// CwdDepth is the most steps cwd's walk takes: one per directory and one
// per mount crossed. bpftrace's opensnoop walks 35 by default.
const CwdDepth = 35

// CwdSize is the buffer cwd fills: the names, leaf first, NUL-ended.
const CwdSize = 256
