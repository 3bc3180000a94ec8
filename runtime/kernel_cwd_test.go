package runtime_test

import (
	"testing"

	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// cwd's unrolled walk through task.fs.pwd, dentries and mounts loads and
// attaches on each kernel of the matrix (make vmtest; 5.10's verifier is
// older than the host's), on a kernel function and on a tracepoint, one
// spec each (khold names one probe's refusal where links cannot be
// pinned).
func TestKernelCwd(t *testing.T) {
	f := kernelFacts(t)
	for name, src := range map[string]string{
		"kernel": `
probe "kernel" "loopscwd" {
  functions = ["vfs_read"]
  on_entry {
    count "reads" {
      by = [cwd]
    }
  }
}`,
		"tracepoint": `
probe "tracepoint" "loopscwd" {
  event = "syscalls:sys_exit_openat"
  on_entry {
    event "open" {
      fields = { fd = args.ret, cwd = cwd }
    }
  }
}`,
	} {
		t.Run(name, func(t *testing.T) {
			cfg, diags := spec.Parse(map[string][]byte{"cwd.hcl": []byte(src)})
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			facts := *f
			if err := facts.LoadTracepoints([]string{"syscalls:sys_exit_openat"}); err != nil {
				t.Fatal(err)
			}
			out, diags := compiler.Compile(cfg, &facts)
			if diags.HasErrors() {
				t.Fatalf("%s: %s", f.Label(), diags)
			}
			w := workspace(t)
			k := khold(t, w, out)
			for _, p := range out.Probes {
				t.Logf("%s: %s via %s", f.Label(), p.Address, p.Route)
			}
			k.done(t)
		})
	}
}
