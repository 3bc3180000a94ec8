package spec

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/probectl/probectl/bpf"
)

var update = flag.Bool("update", false, "rewrite the README's generated lists")

// readmeLists are the README's lists that the table of built-in values
// writes, each between <!-- NAME: begin --> and <!-- NAME: end -->.
func readmeLists() map[string]string {
	return map[string]string{
		"values":         valuesTable(),
		"profile-values": valuesOf(bpf.KindProfile, true),
	}
}

// valuesTable is the README's table of built-in values.
func valuesTable() string {
	var b strings.Builder
	b.WriteString("\n| Value | Probes | bpftrace | What |\n|---|---|---|---|\n")
	seen := map[string]bool{}
	for _, v := range builtinList {
		w := v.written()
		if seen[w] {
			continue
		}
		seen[w] = true
		probes := v.KindsWith()
		if probes == andList(kindNames()) {
			probes = "all"
		}
		switch v.Phase {
		case EntryOnly:
			probes += "; on_entry"
		case ExitOnly:
			probes += "; on_exit"
		}
		bt := "—"
		if v.Bpftrace != "" {
			bt = "`" + v.Bpftrace + "`"
			if first, last, ok := strings.Cut(w, ".."); ok { // arg0..arg5
				bt = "`" + first + "`..`" + last + "`"
			}
		}
		what := v.Doc
		if v.Since != (bpf.Version{}) {
			what += fmt.Sprintf(" (`%s`, Linux %d.%d)", v.Helper, v.Since.Major, v.Since.Minor)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", w, probes, bt, what)
	}
	return b.String()
}

func kindNames() []string {
	var out []string
	for _, k := range bpf.Kinds {
		out = append(out, string(k))
	}
	return out
}

// TestREADMEValues holds the README's lists of built-in values to the
// table: a value added, refused or documented anew shows there, or this
// fails; -update writes them.
func TestREADMEValues(t *testing.T) {
	const path = "../README.md"
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := readme
	for name, want := range readmeLists() {
		begin, end := []byte("<!-- "+name+": begin -->"), []byte("<!-- "+name+": end -->")
		i, j := bytes.Index(out, begin), bytes.Index(out, end)
		if i < 0 || j < i {
			t.Fatalf("README.md has no %s ... %s", begin, end)
		}
		got := string(out[i+len(begin) : j])
		if got == want {
			continue
		}
		if !*update {
			t.Errorf("README.md's %s list is stale (go test ./spec -run TestREADMEValues -update writes it):\n got: %q\nwant: %q", name, got, want)
			continue
		}
		out = append(append(append([]byte{}, out[:i+len(begin)]...), want...), out[j:]...)
	}
	if *update && !bytes.Equal(out, readme) {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// headers open a probe of each kind; the body is its handlers.
var headers = map[bpf.Kind]string{
	bpf.KindKernel:     "probe \"kernel\" \"p\" {\n functions = [\"vfs_read\"]\n",
	bpf.KindUser:       "probe \"user\" \"p\" {\n binary = \"/bin/true\"\n functions = [\"main\"]\n",
	bpf.KindTracepoint: "probe \"tracepoint\" \"p\" {\n event = \"syscalls:sys_enter_read\"\n",
	bpf.KindProfile:    "probe \"profile\" \"p\" {\n frequency = 99\n",
}

// use parses a probe of kind that keys a count by value v, in the
// handler v exists in, and returns its diagnostics.
func use(kind bpf.Kind, b *Builtin) hcl.Diagnostics {
	v := b.Name
	switch b.Name {
	case "task":
		v = "task.pid"
	case "args":
		v = "args.fd"
	case "entry":
		v = "entry.t"
	}
	handler := "on_entry"
	if _, refused := b.Refused[kind]; b.Phase == ExitOnly && !refused {
		handler = "on_exit"
	}
	header := headers[kind]
	if b.USDTOnly && kind == bpf.KindUser {
		header = "probe \"user\" \"p\" {\n binary = \"/bin/true\"\n usdt = \"p:n\"\n"
	}
	src := header + fmt.Sprintf("%s {\n count \"c\" { by = [%s] }\n}\n", handler, v)
	if b.Name == "entry" {
		src += "on_entry {\n save = { t = ktime }\n}\n"
	}
	_, diags := Parse(map[string][]byte{"p.hcl": []byte(src + "}\n")})
	return diags
}

// The lists the errors give are the values that parse: the profile
// probe's errors once listed pid, tid, comm, cpu, ktime, kstack, ustack
// and task, and not uid, gid, cgroup or ppid, which it has; ppid's error
// in a user probe said kernel and tracepoint probes have it, not profile
// probes. Every value is tried in every kind of probe; every refusal is
// the table's, and every list names exactly where the value parses.
func TestRefusalsListWhatParses(t *testing.T) {
	has := map[bpf.Kind][]string{}
	where := map[string][]string{}
	for _, b := range builtinList {
		for _, kind := range bpf.Kinds {
			diags := use(kind, b)
			switch r, refused := b.Refused[kind]; {
			case !b.Has(kind) && !refused:
				if !diags.HasErrors() {
					t.Errorf("%s in a %s probe parses, but the table says it has no %s handler", b.Name, kind, map[Phase]string{ExitOnly: "on_exit"}[b.Phase])
				}
			case refused:
				if len(diags) != 1 || diags[0].Summary != b.expand(r.Summary) || diags[0].Detail != b.expand(r.Detail) {
					t.Errorf("%s in a %s probe: %v, want the table's refusal %q", b.Name, kind, diags, b.expand(r.Summary))
				}
			case diags.HasErrors():
				t.Errorf("%s in a %s probe: %v", b.Name, kind, diags)
			default:
				if !slices.Contains(has[kind], b.written()) {
					has[kind] = append(has[kind], b.written())
				}
				if !slices.Contains(where[b.Name], string(kind)) {
					where[b.Name] = append(where[b.Name], string(kind))
				}
			}
		}
	}
	for _, v := range []string{"uid", "gid", "cgroup", "ppid"} { // the values the list missed
		if !slices.Contains(has[bpf.KindProfile], v) {
			t.Errorf("%s does not parse in a profile probe", v)
		}
	}
	_, diags := Parse(map[string][]byte{"p.hcl": []byte(headers[bpf.KindProfile] + "on_entry {\n count \"c\" { by = [arg0] }\n}\n}\n")})
	if want := "It has " + andList(has[bpf.KindProfile]) + "."; len(diags) != 1 || !strings.HasSuffix(diags[0].Detail, want) {
		t.Errorf("arg0 in a profile probe: %v, want a detail ending %q", diags, want)
	}
	_, diags = Parse(map[string][]byte{"p.hcl": []byte(headers[bpf.KindUser] + "on_entry {\n count \"c\" { by = [ppid] }\n}\n}\n")})
	if want := andList(where["ppid"]) + " probes have it."; len(diags) != 1 || !strings.HasSuffix(diags[0].Detail, want) {
		t.Errorf("ppid in a user probe: %v, want a detail ending %q", diags, want)
	}
	t.Logf("a profile probe has %s", andList(has[bpf.KindProfile]))
}

// An unknown name's error lists every built-in value, and suggests by the
// table; bpftrace's spellings map to values that exist.
func TestUnknownNameListsEveryValue(t *testing.T) {
	_, diags := Parse(map[string][]byte{"p.hcl": []byte(headers[bpf.KindKernel] + "on_entry {\n count \"c\" { by = [jiffie] }\n}\n}\n")})
	if len(diags) != 1 || diags[0].Summary != "Unknown name" {
		t.Fatalf("jiffie: %v", diags)
	}
	for _, b := range builtinList {
		if !strings.Contains(diags[0].Detail, b.written()) {
			t.Errorf("the unknown name's list lacks %s: %s", b.written(), diags[0].Detail)
		}
	}
	if !strings.Contains(diags[0].Detail, `Did you mean "jiffies"?`) {
		t.Errorf("jiffie: %s, want a suggestion of jiffies", diags[0].Detail)
	}
	for spelling, hint := range bpftraceSpellings {
		name, _, _ := strings.Cut(hint, ":")
		name, _, _ = strings.Cut(name, " ")
		if LookupBuiltin(spelling) != nil || LookupBuiltin(name) == nil {
			t.Errorf("bpftrace's %s: %q, which names no value (or %s is one itself)", spelling, hint, spelling)
		}
	}
}
