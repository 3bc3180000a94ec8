package compiler_test

import (
	"os"
	"strings"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
)

// optional("...") patterns may match nothing (the plan says which);
// optional = true leaves out a probe that cannot attach, saying why; a
// probe whose every pattern is optional and matched nothing is left out
// too. Without them, the errors stay.
func TestOptionalProbes(t *testing.T) {
	facts := mustProfile(t, "linux-7.2-amd64")
	facts.Functions = []string{"vfs_read", "vfs_write"}
	probe := func(name, attrs string) string {
		return "probe \"kernel\" \"" + name + "\" {\n" + attrs + "\n  on_entry {\n    count \"c\" {}\n  }\n}\n"
	}
	out := compileText(t, facts, probe("some", `functions = ["vfs_read", optional("vfs_fsync"), optional("ksys_*")]`)+
		probe("none", `functions = [optional("vfs_fsync")]`)+
		probe("whole", "functions = [\"vfs_fsync\"]\noptional = true"))
	if len(out.Probes) != 1 || out.Probes[0].Address.String() != "kernel.some" {
		t.Fatalf("probes: %v", out.Probes)
	}
	p := out.Probes[0]
	if strings.Join(p.Functions, " ") != "vfs_read" || len(p.Missing) != 2 ||
		!strings.Contains(p.Missing[0], `optional("vfs_fsync"): not a probe-able function`) ||
		!strings.Contains(p.Missing[1], `optional("ksys_*"): matches no function`) {
		t.Errorf("kernel.some: functions %v, missing %q", p.Functions, p.Missing)
	}
	var skipped []string
	for _, s := range out.Skipped {
		skipped = append(skipped, s.Address.String()+": "+s.Why)
	}
	if len(skipped) != 2 || !strings.HasPrefix(skipped[0], "kernel.none: every pattern is optional and none matched") ||
		!strings.HasPrefix(skipped[1], "kernel.whole: Function not found: ") {
		t.Errorf("skipped: %q", skipped)
	}
	wantError(t, compileErrors(t, facts, probe("strict", `functions = ["vfs_fsync"]`)), "Function not found", 2)

	// A table whose every user is left out is left out too (where its
	// type cannot be told): biolatency-kp on a kernel that inlined both
	// spellings of its functions.
	out = compileText(t, facts, `table "started" {
  max_keys = 16
}
probe "kernel" "start" {
  functions = [optional("blk_account_io_start")]
  on_entry {
    store "started" {
      key   = [arg0]
      value = ktime
    }
  }
}
probe "kernel" "done" {
  functions = [optional("blk_account_io_done")]
  on_entry {
    hist "usecs" {
      when  = has(started, [arg0])
      value = ktime - started[arg0]
    }
  }
}`)
	if len(out.Probes) != 0 || len(out.Tables) != 0 || len(out.Skipped) != 2 {
		t.Errorf("every user skipped: probes %v, tables %v, skipped %v", out.Probes, out.Tables, out.Skipped)
	}

	// Tracepoints: events that may be missing.
	out = compileText(t, facts, `probe "tracepoint" "t" {
  event = ["syscalls:sys_enter_kill", optional("syscalls:sys_enter_nosuch*")]
  on_entry {
    count "c" {}
  }
}`)
	if len(out.Probes) != 1 || len(out.Probes[0].Tracepoints) != 1 || len(out.Probes[0].Missing) != 1 {
		t.Errorf("tracepoint: %+v", out.Probes[0].Description)
	}
}

// binary = "libc" is the library the dynamic linker's cache names.
func TestBinaryLibrary(t *testing.T) {
	want, err := symbols.ResolveLibrary(symbols.LDCache, "libc", bpf.ArchX86_64)
	if err != nil {
		t.Skipf("no x86-64 libc in %s: %v", symbols.LDCache, err)
	}
	if _, err := os.Stat(want); err != nil {
		t.Skip(err)
	}
	facts := mustProfile(t, "linux-7.2-amd64")
	out := compileText(t, facts, `probe "user" "malloc" {
  binary    = "libc"
  functions = ["malloc"]
  on_entry {
    count "c" {}
  }
}`)
	if p := out.Probes[0]; p.Binary != want || p.Library != "libc" {
		t.Errorf("binary %q (library %q), want %s", p.Binary, p.Library, want)
	}
	wantError(t, compileErrors(t, facts, `probe "user" "x" {
  binary    = "libnosuch-key"
  functions = ["malloc"]
  on_entry {
    count "c" {}
  }
}`), "Library not found", 2)
}
