package runtime_test

import (
	"embed"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
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
	f := liveFacts(t)
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
			if !f.Helpers.AttachCookie {
				// 5.10: the sites' arguments differ, and they are told
				// apart by the attach cookie (5.15): the plan refuses.
				refusedWithoutCookies(t, f, bin)
				return
			}
			checkUSDTWork(t, bin, attach)
		})
	}
}

// refusedWithoutCookies checks that the USDT workload's spec is refused
// at plan on a kernel without bpf_get_attach_cookie, for that reason.
func refusedWithoutCookies(t *testing.T, f *bpf.Facts, bin string) {
	t.Helper()
	cfg, diags := spec.Parse(map[string][]byte{"test.hcl": []byte(strings.ReplaceAll(usdtWorkSpec, "BIN", bin))})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, diags = compiler.Compile(cfg, f)
	for _, d := range diags {
		if d.Summary == "No attach cookies" {
			return
		}
	}
	t.Fatalf("%s lacks attach cookies, and the USDT spec was not refused for it: %v", f.Label(), diags)
}
