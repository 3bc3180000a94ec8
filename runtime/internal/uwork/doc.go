// Package uwork is a workload for the runtime tests' user probes that
// needs no C compiler, so that it runs in the kernel matrix's VMs of
// either architecture: Target is a leaf in assembly (no frame, no stack
// growth), which a uretprobe or uprobe.session can return through safely
// while the process runs without garbage collection or asynchronous
// preemption (the caller's job: GOGC=off, GODEBUG=asyncpreemptoff=1), the
// only Go runtime activity that walks stacks.
package uwork

// Target returns x+1.
func Target(x int64) int64

// Loop calls Target n times and returns the sum of the results.
func Loop(n int) int64 {
	var s int64
	for i := 0; i < n; i++ {
		s += Target(int64(i))
	}
	return s
}
