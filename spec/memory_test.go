package spec_test

import (
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/spec"
)

// tracepointValue is a spec whose one sum has value = expr.
func tracepointValue(expr string) string {
	return "probe \"tracepoint\" \"t\" {\n  event = \"syscalls:sys_enter_read\"\n  on_entry {\n    sum \"s\" {\n      value = " +
		expr + "\n    }\n  }\n}\n"
}

// chain is "pid + pid + ... + pid" with n terms.
func chain(n int) string { return strings.TrimSuffix(strings.Repeat("pid + ", n), " + ") }

// allocated is the bytes allocated by checking a value of n terms.
func allocated(t *testing.T, n int) uint64 {
	src := []byte(tracepointValue(chain(n)))
	goruntime.GC()
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	if _, diags := spec.Parse(map[string][]byte{"long.hcl": src}); diags.HasErrors() {
		t.Fatal(diags)
	}
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Memory grows linearly with an expression's size: every node used to keep
// its own copy of its source text (50000 terms: 5 GB, 10.6 s).
func TestLongExpressionMemory(t *testing.T) {
	start := time.Now()
	small, large := allocated(t, 10000), allocated(t, 50000)
	t.Logf("10000 terms: %d MB; 50000 terms: %d MB; both in %v", small>>20, large>>20, time.Since(start))
	if large > 7*small {
		t.Errorf("50000 terms take %.1f times the bytes of 10000: not linear", float64(large)/float64(small))
	}
	if large > 512<<20 {
		t.Errorf("50000 terms take %d MB", large>>20)
	}
}
