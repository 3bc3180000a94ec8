package runtime_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/probectl/probectl/internal/testenv"
)

// TestKernelKaddrLoadAverages reads the kernel's avenrun through
// kaddr("avenrun") (its address from /proc/kallsyms at apply) and
// kernel_u64 in a one-CPU cpu-clock timer, bpftrace's loads.bt: the three
// values last sampled, printed as fs/proc/loadavg.c prints them
// (LOAD_INT and LOAD_FRAC of x + FIXED_1/200), are /proc/loadavg's first
// three fields read in the same 5 s update window, retried when the
// kernel updated them in between. The VM matrix runs it: the host's
// kernel lists no variables in kallsyms.
func TestKernelKaddrLoadAverages(t *testing.T) {
	f := kernelFacts(t)
	if !f.Perf.Link {
		testenv.Absent(t, "profile probes attach with BPF links on perf events (Linux 5.15)")
	}
	src := `probe "profile" "loads" {
  event     = "cpu-clock"
  period_ns = 20000000
  one_cpu   = true
  on_entry {
    max "seen" {
      value = ktime
      by    = [kernel_u64(kaddr("avenrun")), kernel_u64(kaddr("avenrun") + 8), kernel_u64(kaddr("avenrun") + 16)]
    }
  }
}`
	w := workspace(t)
	k := khold(t, w, kcompile(t, f, src, 0))
	defer k.done(t)
	for try := 1; ; try++ {
		before, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		ar := k.agg(t, "profile.loads", "seen")
		after, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			t.Fatal(err)
		}
		var last []uint64
		latest := int64(-1)
		for _, e := range ar.Entries {
			if *e.Value <= latest {
				continue
			}
			latest, last = *e.Value, nil
			for _, kf := range e.Key {
				v, err := strconv.ParseUint(fmt.Sprint(kf.Value), 10, 64)
				if err != nil {
					t.Fatalf("key %v: %v", e.Key, err)
				}
				last = append(last, v)
			}
		}
		var parts []string
		for _, x := range last {
			x += 2048 / 200
			parts = append(parts, fmt.Sprintf("%d.%02d", x>>11, ((x&2047)*100)>>11))
		}
		got := strings.Join(parts, " ")
		want := strings.Join(strings.Fields(string(before))[:3], " ")
		same := want == strings.Join(strings.Fields(string(after))[:3], " ")
		t.Logf("try %d: avenrun %v prints %q; /proc/loadavg %q then %q (%d keys)", try, last, got, strings.TrimSpace(string(before)), strings.TrimSpace(string(after)), len(ar.Entries))
		if len(last) == 3 && same && got == want {
			return
		}
		if try == 30 {
			t.Fatal("avenrun as sampled never matched /proc/loadavg in one window")
		}
	}
}
