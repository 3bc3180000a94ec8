package compiler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// TestStacksByContentFromLinux61: from Linux 6.1 a probe's stacks go into
// hash maps allocated as they fill (BPF_F_NO_PREALLOC), keyed by the hash
// of the frames, each with its per-CPU scratch buffer (user stacks of
// more than 30 frames in a long map of their own); before 6.1 into the
// kernel's stack trace maps, and the plan says why. A profile's maps are
// sized from its rate and the CPUs within the budget, or as stack_entries
// says, and the plan shows the stacks and their bytes when all are taken;
// the locked memory the plan counts for a map stored by content is its
// buckets only.
func TestStacksByContentFromLinux61(t *testing.T) {
	const src = `probe "profile" "p" {
  frequency = %d
  %s
  on_entry {
    count "c" {
      by = [ustack, kstack(20)]
    }
  }
}
`
	for _, c := range []struct {
		kernel  bpf.Version
		freq    int
		cpus    int
		setting string
		typ     ebpf.MapType
		entries uint32
		purpose []string // in the user stack map's purpose
	}{
		{bpf.Version{Major: 6, Minor: 1}, 10, 2, "", ebpf.Hash, 10 * 2 * 600,
			[]string{"stored by content", "sized for its samples in 600 s (10 Hz × 2 CPUs)", "12000 stacks, 11.7 MiB when all are taken"}},
		{bpf.Version{Major: 6, Minor: 1}, 99, 64, "", ebpf.Hash, 128 << 20 / (1024 + 8192/8 + 256),
			[]string{"sized for the 128.0 MiB budget", "58254 stacks, 56.9 MiB when all are taken"}},
		{bpf.Version{Major: 6, Minor: 1}, 99, 64, "stack_entries = 1000", ebpf.Hash, 1000,
			[]string{"as stack_entries says", "1000 stacks, 1000 KiB when all are taken"}},
		{bpf.Version{Major: 5, Minor: 15}, 10, 2, "", ebpf.StackTrace, 10 * 2 * 600,
			[]string{"predates Linux 6.1", "12000 stacks, 46.5 MiB preallocated"}},
	} {
		cfg, diags := spec.Parse(map[string][]byte{"p.hcl": []byte(fmt.Sprintf(src, c.freq, c.setting))})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		facts, _ := bpf.Profile("linux-6.1-amd64")
		facts.Kernel, facts.CPUs = c.kernel, c.cpus
		out, diags := Compile(cfg, facts)
		if diags.HasErrors() {
			t.Fatalf("%v %q: %v", c.kernel, c.setting, diags)
		}
		maps := map[string]*Map{}
		for _, m := range out.Probes[0].Maps {
			maps[m.Ref] = m
		}
		u, k := maps["ustack_127"], maps["kstack_20"]
		if u == nil || k == nil {
			t.Fatalf("%v: no stack maps: %+v", c.kernel, out.Probes[0].Maps)
		}
		for _, m := range []*Map{u, k} {
			if m.Type != c.typ || m.MaxEntries != c.entries {
				t.Errorf("%v %q: %s is a %v of %d entries, want a %v of %d", c.kernel, c.setting, m.Ref, m.Type, m.MaxEntries, c.typ, c.entries)
			}
			buf, deepest := maps[m.Ref+"_buf"], m
			if l := maps[m.Ref+"_long"]; l != nil {
				// Stacks of more than 30 user frames go to the long map,
				// an eighth of the entries.
				if m.ValueSize != 30*32 || l.Type != ebpf.Hash || l.MaxEntries != max(c.entries/8, 64) || l.Flags != flagNoPrealloc {
					t.Errorf("%v: short map %+v, long map %+v", c.kernel, m, l)
				}
				deepest = l
			}
			if byContent := c.typ == ebpf.Hash; byContent != (buf != nil) || byContent && (m.Flags != flagNoPrealloc || m.KeySize != 8 || buf.ValueSize != deepest.ValueSize) {
				t.Errorf("%v: %s: flags %#x key %d, scratch %+v", c.kernel, m.Ref, m.Flags, m.KeySize, buf)
			}
		}
		for _, want := range c.purpose {
			if !strings.Contains(u.Purpose, want) {
				t.Errorf("%v %q: the user stack map's purpose %q does not say %q", c.kernel, c.setting, u.Purpose, want)
			}
		}
		if c.typ == ebpf.Hash {
			// Buckets: max_entries rounded up to a power of two, 16 bytes each.
			var buckets int64 = 1
			for buckets < int64(c.entries) {
				buckets *= 2
			}
			p := &Probe{Maps: []*Map{u}}
			if got := p.MemoryBytes(c.cpus); got != buckets*16 {
				t.Errorf("%v %q: locked memory of the user stack map %d, want %d (its buckets)", c.kernel, c.setting, got, buckets*16)
			}
		}
	}
}

// TestStackSharedByTable: a stack stored in a table another probe reads
// (bpftrace's biostacks) is kept in the table's stack maps, which both
// probes use in place of their own: the storing probe makes no stack map
// of that ref (only its scratch buffer, stored by content), and the
// reader's key field names the ref, so its ids mean the same there. On
// 6.1 and later the table keeps a short and a long hash map, before a
// stack trace map; a table one probe uses keeps none.
func TestStackSharedByTable(t *testing.T) {
	const src = `table "st" {}
probe "tracepoint" "a" {
  event = "sched:sched_switch"
  on_entry {
    store "st" {
      key   = [cpu]
      value = kstack
    }
  }
}
probe "tracepoint" "b" {
  event = "sched:sched_wakeup"
  on_entry {
    count "n" { by = [st[cpu]] }
  }
}
`
	for _, c := range []struct {
		kernel bpf.Version
		shared bool
		refs   []string // the table's stack maps
		typ    ebpf.MapType
	}{
		{bpf.Version{Major: 6, Minor: 1}, true, []string{"kstack_127", "kstack_127_long"}, ebpf.Hash},
		{bpf.Version{Major: 5, Minor: 15}, true, []string{"kstack_127"}, ebpf.StackTrace},
		{bpf.Version{Major: 6, Minor: 1}, false, nil, ebpf.Hash},
	} {
		text := src
		if !c.shared { // a alone reads it
			text = strings.Replace(src, "value = kstack\n    }\n", "value = kstack\n    }\n    count \"m\" { by = [st[cpu]] }\n", 1)
			text = strings.Replace(text, "count \"n\" { by = [st[cpu]] }", "count \"n\" { by = [cpu] }", 1)
		}
		cfg, diags := spec.Parse(map[string][]byte{"s.hcl": []byte(text)})
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		facts, _ := bpf.Profile("linux-6.1-amd64")
		facts.Kernel = c.kernel
		out, diags := Compile(cfg, facts)
		if diags.HasErrors() {
			t.Fatalf("%v: %v", c.kernel, diags)
		}
		var refs []string
		for _, m := range out.Tables[0].Maps {
			if isStackRef(m.Ref) {
				refs = append(refs, m.Ref)
				if m.Type != c.typ {
					t.Errorf("%v: table map %s is a %v, want a %v", c.kernel, m.Ref, m.Type, c.typ)
				}
			}
		}
		if fmt.Sprint(refs) != fmt.Sprint(c.refs) {
			t.Errorf("%v shared=%v: the table's stack maps are %v, want %v", c.kernel, c.shared, refs, c.refs)
		}
		a, b := out.Probes[0], out.Probes[1]
		for _, m := range a.Maps {
			if c.shared && (m.Ref == "kstack_127" || m.Ref == "kstack_127_long") {
				t.Errorf("%v: probe a makes %s, which the table gives it", c.kernel, m.Ref)
			}
		}
		own := 0
		for _, m := range a.Maps {
			if m.Ref == "kstack_127" {
				own++
			}
		}
		if !c.shared && own != 1 {
			t.Errorf("%v: probe a alone has %d kstack_127 maps, want 1", c.kernel, own)
		}
		if c.shared {
			if f := b.Aggregations[0].Key[0]; f.Kind != KeyKStack || f.StackMap != "kstack_127" {
				t.Errorf("%v: b's key field %+v, want a kernel stack of kstack_127", c.kernel, f)
			}
		}
	}
}

// TestStacksOfTwoTables: a probe given stack maps of one ref by two tables
// is refused, once, naming both: it has one map of the ref.
func TestStacksOfTwoTables(t *testing.T) {
	src := `table "s1" {}
table "s2" {}
probe "tracepoint" "a" {
  event = "sched:sched_switch"
  on_entry {
    store "s1" {
      key   = [cpu]
      value = kstack
    }
    store "s2" {
      key   = [tid]
      value = kstack
    }
  }
}
probe "tracepoint" "b" {
  event = "sched:sched_wakeup"
  on_entry {
    count "n" { by = [s1[cpu], s2[tid]] }
  }
}
`
	cfg, diags := spec.Parse(map[string][]byte{"s.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	facts, _ := bpf.Profile("linux-6.1-amd64")
	_, diags = Compile(cfg, facts)
	var got []string
	for _, d := range diags {
		if d.Summary == "Stacks of two tables" {
			got = append(got, fmt.Sprintf("%d: %s", d.Subject.Start.Line, d.Detail))
		}
	}
	// Both probes use both tables: each is refused once.
	if len(got) != 2 || !strings.Contains(got[0], `"s1" and "s2"`) || !strings.Contains(got[0], "kstack_127") {
		t.Errorf("got %q, want one refusal per probe naming s1, s2 and kstack_127", got)
	}
}
