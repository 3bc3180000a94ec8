// Command vmexec runs a Go test binary inside a real Debian kernel under
// QEMU: it is the project's "go test -exec" hook for the kernel matrix.
//
//	PROBECTL_VM_KERNEL=linux-6.12-arm64 GOARCH=arm64 CGO_ENABLED=0 \
//	    go test -exec /path/to/vmexec ./runtime -run TestKernel
//
// It resolves the kernel's Debian package (newest ABI) with a private apt
// configuration that leaves the machine's own untouched, keeps only its
// vmlinuz in a cache outside the git tree, builds an initramfs holding
// vminit as /init and the test binary, boots QEMU (TCG), streams the
// console, and exits with the test binary's exit code. Anything that stops
// the kernel from booting or the test from running is a failure.
//
//	vmexec -fetch [KERNEL...]   download kernels into the cache (default: all)
//	vmexec -list                list the kernels of the matrix
//	vmexec -tracepoints DIR [KERNEL...]
//	                            capture each kernel's tracepoint formats into
//	                            DIR/KERNEL.tp.gz (default: all kernels)
package main

import (
	"fmt"
	"os"
	"strings"
)

func main() {
	args := os.Args[1:]
	switch {
	case len(args) > 0 && args[0] == "-list":
		for _, k := range kernels {
			fmt.Printf("%s\t%s\t%s\n", k.Name, k.Arch, k.Suite)
		}
	case len(args) > 0 && args[0] == "-fetch":
		exitOnError(fetchKernels(args[1:]))
	case len(args) > 1 && args[0] == "-tracepoints":
		exitOnError(captureTracepoints(args[1], args[2:]))
	case len(args) == 0 || strings.HasPrefix(args[0], "-"):
		fmt.Fprintln(os.Stderr, "usage: vmexec TESTBINARY [ARGS...] (with PROBECTL_VM_KERNEL set), vmexec -fetch [KERNEL...], vmexec -tracepoints DIR [KERNEL...], vmexec -list")
		os.Exit(2)
	default:
		os.Exit(runTest(args[0], args[1:]))
	}
}

// exitOnError exits 1 when err is not nil, saying why.
func exitOnError(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmexec: %v\n", err)
		os.Exit(1)
	}
}

// fetchKernels downloads the kernels named (default: all) into the cache,
// stopping at the first that fails.
func fetchKernels(names []string) error {
	if len(names) == 0 {
		for _, k := range kernels {
			names = append(names, k.Name)
		}
	}
	for _, n := range names {
		k, err := kernelByName(n)
		if err == nil {
			_, err = k.Fetch()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// runTest runs testBin with args in the VM of PROBECTL_VM_KERNEL and
// returns the exit code: the test's, 1 when the VM failed it, 2 without
// a kernel.
func runTest(testBin string, args []string) int {
	name := os.Getenv("PROBECTL_VM_KERNEL")
	if name == "" {
		fmt.Fprintf(os.Stderr, "vmexec: set PROBECTL_VM_KERNEL to one of: %s\n", strings.Join(kernelNames(), ", "))
		return 2
	}
	k, err := kernelByName(name)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmexec: %v\n", err)
		return 2
	}
	code, err := runVM(k, testBin, args, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmexec: %s: %v\n", k.Name, err)
		return 1
	}
	return code
}
