package runtime_test

import (
	"embed"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"
)

// usdtWork holds testdata/usdt.c built static for each architecture of
// the kernel matrix by make usdt-work (make vmtest runs it), with the
// compiler's sys/sdt.h: the VMs have no C compiler.
//
//go:embed testdata/usdtwork
var usdtWork embed.FS

// TestKernelUSDT runs TestUSDT's checks in the kernel matrix, on the
// workload built for the VM's architecture: on arm64 its notes carry
// arm64's operands (-8@x1, -4@[sp, 12], -8@[x0, 8], -8@[x4], -4@5), read
// from arm64's pt_regs. -O0 attaches a uprobe per site, -O2 one
// uprobe.multi link where the kernel has it.
func TestKernelUSDT(t *testing.T) {
	if !inVM() {
		t.Skip("the kernel matrix runs it on the workloads make usdt-work builds; the host runs TestUSDT")
	}
	requireRoot(t)
	for opt, attach := range map[string]string{"O0": "uprobe", "O2": "auto"} {
		t.Run(opt, func(t *testing.T) {
			name := "usdt-" + goruntime.GOARCH + "-" + opt
			b, err := usdtWork.ReadFile("testdata/usdtwork/" + name)
			if err != nil {
				// make vmtest builds it first: here it is a failure.
				t.Fatalf("the test binary embeds no %s (make usdt-work builds it with a C compiler for %s and systemtap-sdt-dev's sys/sdt.h): %v",
					name, goruntime.GOARCH, err)
			}
			bin := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(bin, b, 0o755); err != nil {
				t.Fatal(err)
			}
			checkUSDTWork(t, bin, attach)
		})
	}
}
