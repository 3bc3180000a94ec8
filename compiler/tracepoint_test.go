package compiler_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf/asm"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/spec"
)

// sched_process_fork as Linux 6.18 gives it: its __data_loc fields were
// read as one field named "char", the descriptor (length<<16 | offset)
// counted as a value.
const forkFormat = `name: sched_process_fork
ID: 366
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:__data_loc char[] parent_comm;	offset:8;	size:4;	signed:0;
	field:pid_t parent_pid;	offset:12;	size:4;	signed:1;
	field:__data_loc char[] child_comm;	offset:16;	size:4;	signed:0;
	field:pid_t child_pid;	offset:20;	size:4;	signed:1;

print fmt: "comm=%s pid=%d child_comm=%s child_pid=%d", __get_str(parent_comm), REC->parent_pid, __get_str(child_comm), REC->child_pid
`

// Strings (char[N], __data_loc char[]) and byte arrays are readable, as
// keys; a struct by value is refused, saying what it is; a string used as
// an integer is refused at its range.
func TestTracepointFieldClasses(t *testing.T) {
	facts := mustProfile(t, "linux-7.2-amd64")
	fork, err := bpf.ParseTracepointFormat("sched:sched_process_fork", forkFormat)
	if err != nil {
		t.Fatal(err)
	}
	other, err := bpf.ParseTracepointFormat("test:fields", `format:
	field:char comm[16];	offset:8;	size:16;	signed:0;
	field:u8 addr[6];	offset:24;	size:6;	signed:0;
	field:struct foo bar;	offset:32;	size:16;	signed:0;
	field:const char * name;	offset:48;	size:8;	signed:0;
`)
	if err != nil {
		t.Fatal(err)
	}
	facts.Tracepoints = map[string]*bpf.TracepointFormat{fork.Event: fork, other.Event: other}
	probe := func(event, field string) string {
		return fmt.Sprintf(`probe "tracepoint" "t" {
  event = %q
  on_entry {
    count "c" {
      by = [args.%s]
    }
  }
}`, event, field)
	}
	wantError(t, compileErrors(t, facts, probe(fork.Event, "char")), "Unknown tracepoint field", 5)
	diags := compileErrors(t, facts, probe(other.Event, "bar"))
	wantError(t, diags, "Field cannot be read", 5)
	if !strings.Contains(diags[0].Detail, "struct foo") {
		t.Errorf("args.bar: %q does not say what it is", diags[0].Detail)
	}
	// A pointer is a 64-bit unsigned value: it keys as the kernel stores it.
	want := map[string]string{"parent_comm": "string", "child_comm": "string", "child_pid": "int", "comm": "string", "addr": "bytes", "name": "uint"}
	for event, fields := range map[string][]string{fork.Event: {"parent_comm", "child_comm", "child_pid"}, other.Event: {"comm", "addr", "name"}} {
		for _, field := range fields {
			out := compileText(t, facts, probe(event, field))
			if k := out.Probes[0].Aggregations[0].Key[0].Kind; string(k) != want[field] {
				t.Errorf("args.%s keys as %s, want %s", field, k, want[field])
			}
		}
	}
	sum := fmt.Sprintf(`probe "tracepoint" "t" {
  event = %q
  on_entry {
    sum "s" {
      value = args.comm
    }
  }
}`, other.Event)
	wantError(t, compileErrors(t, facts, sum), "Not an integer", 5)
}

// A tracepoint whose format cannot be read is an error at its event, not
// a failure of the whole command.
func TestTracepointFormatUnreadable(t *testing.T) {
	dir := t.TempDir()
	facts := mustProfile(t, "linux-7.2-amd64")
	facts.Source = "live"
	src := `probe "tracepoint" "t" {
  event = "sched:sched_switch"
  on_entry {
    count "c" {}
  }
}`
	facts.LoadTracepointsFrom(dir, []string{"sched:sched_switch"})
	wantError(t, compileErrors(t, facts, src), "Tracepoint not found", 2)
	writeFile(t, dir+"/events/sched/sched_switch/format", "format:\n\tfield:int prev_pid;\toffset:eight;\tsize:4;\tsigned:1;\n")
	facts.LoadTracepointsFrom(dir, []string{"sched:sched_switch"})
	wantError(t, compileErrors(t, facts, src), "Tracepoint format unreadable", 2)
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The kernel attaches a tracepoint program to an event only if every load
// from the record ends within that event's record (max_ctx_offset), and a
// probe over several events shares one program: a field further along in
// one event (tgkill's sig, at 32) than another's record is long (kill's
// ends at 32) must not be a load from the record, or attaching to
// sys_enter_kill fails with EACCES.
func TestMultiEventLoadsFitEveryRecord(t *testing.T) {
	facts := mustProfile(t, "linux-7.2-amd64")
	out := compileText(t, facts, `probe "tracepoint" "t" {
  event = ["syscalls:sys_enter_kill", "syscalls:sys_enter_tgkill"]
  on_entry {
    sum "s" {
      value = args.sig + args.pid
    }
  }
}`)
	shortest := 0
	for _, ev := range out.Probes[0].Tracepoints {
		end := 0
		tp, err := facts.Tracepoint(ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range tp.Fields {
			end = max(end, f.Offset+f.Size)
		}
		if shortest == 0 || end < shortest {
			shortest = end
		}
	}
	if shortest != 32 {
		t.Fatalf("sys_enter_kill's record ends at %d, want 32", shortest)
	}
	prog := out.Probes[0].Programs[0]
	ctx := asm.R6 // the context, kept in R6 from the first instruction
	if first := prog.Instructions[0]; first.OpCode.ALUOp() != asm.Mov || first.Dst != ctx || first.Src != asm.R1 {
		t.Fatalf("first instruction %v does not keep the context in R6", first)
	}
	for _, ins := range prog.Instructions {
		if ins.OpCode.Class().IsLoad() && ins.OpCode.Mode() == asm.MemMode && ins.Src == ctx {
			if end := int(ins.Offset) + ins.OpCode.Size().Sizeof(); end > shortest {
				t.Errorf("%v loads from the record up to %d, past the %d bytes of sys_enter_kill's", ins, end, shortest)
			}
		}
	}
}

// A field declared "unsigned" in one event and "unsigned int" in another
// (nr_sector of block_bio_complete and block_rq_complete) has one type.
func TestMultiEventFieldSpellings(t *testing.T) {
	facts := mustProfile(t, "linux-7.2-amd64")
	facts.Tracepoints = map[string]*bpf.TracepointFormat{}
	for event, typ := range map[string]string{"block:bio": "unsigned", "block:rq": "unsigned int", "block:other": "int"} {
		tp, err := bpf.ParseTracepointFormat(event, "format:\n\tfield:"+typ+" nr_sector;\toffset:8;\tsize:4;\tsigned:0;\n")
		if err != nil {
			t.Fatal(err)
		}
		facts.Tracepoints[event] = tp
	}
	probe := func(events string) string {
		return `probe "tracepoint" "t" {
  event = ` + events + `
  on_entry {
    sum "sectors" {
      value = args.nr_sector
    }
  }
}`
	}
	compileText(t, facts, probe(`["block:bio", "block:rq"]`))
	wantError(t, compileErrors(t, facts, probe(`["block:bio", "block:other"]`)), "Field types differ", 5)
}

// A target that lists its events but knows no formats (a facts file
// written without them) cannot plan runqlat: each probe is reported once,
// at its first field read, in line order (runqlat reads nine fields).
func TestUnknownFormatsOncePerProbe(t *testing.T) {
	facts := withoutFormats(t, mustProfile(t, "linux-7.2-amd64"))
	cfg, diags := spec.LoadPaths([]string{"../examples/bpftrace/runqlat.hcl"})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	_, diags = compiler.Compile(cfg, facts)
	var got []string
	for _, d := range diags {
		got = append(got, fmt.Sprintf("%d:%d %s: %s", d.Subject.Start.Line, d.Subject.Start.Column, d.Summary, d.Detail))
	}
	want := []string{
		`32:16 Tracepoint format unknown: args.pid cannot be located: the formats of "sched:sched_wakeup" and "sched:sched_wakeup_new" are not known`,
		`44:15 Tracepoint format unknown: args.prev_pid cannot be located: the format of "sched:sched_switch" is not known`,
	}
	if len(got) != len(want) {
		t.Fatalf("diagnostics:\n%s", strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("diagnostic %d:\n got %s\nwant %s...", i, got[i], want[i])
		}
	}
}
