package bpf

import "github.com/cilium/ebpf/btf"

// kernelBTF caches the running kernel's BTF for the whole process.
var kernelBTF = btf.NewCache()

// KernelBTF is the running kernel's BTF, parsed at most once per process
// (a tenth of a second or more each time): detection, typed data and
// every load share it. Pass KernelBTFCache to cilium/ebpf's loads, which
// would otherwise parse it again for each collection that has a tracing
// program.
func KernelBTF() (*btf.Spec, error) { return kernelBTF.Kernel() }

// KernelBTFCache is the cache KernelBTF reads, for
// ebpf.CollectionOptions.Cache.
func KernelBTFCache() *btf.Cache { return kernelBTF }
