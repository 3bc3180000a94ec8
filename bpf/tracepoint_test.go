package bpf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func TestTracepointFormat(t *testing.T) {
	const text = `name: sched_process_fork
ID: 782
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:__data_loc char[] parent_comm;	offset:8;	size:4;	signed:0;
	field:pid_t parent_pid;	offset:12;	size:4;	signed:1;
	field:const char * filename;	offset:24;	size:8;	signed:0;
	field:char comm[16];	offset:32;	size:16;	signed:0;
	field:u8 fsid[16];	offset:48;	size:16;	signed:0;
	field:const char *const * argv;	offset:64;	size:8;	signed:0;
	field:unsigned long args[];	offset:72;	size:0;	signed:0;
`
	tp, err := ParseTracepointFormat("sched:sched_process_fork", text)
	if err != nil {
		t.Fatal(err)
	}
	want := []TracepointField{
		{Name: "parent_comm", Type: "__data_loc char[]", Class: FieldDataLoc, Offset: 8, Size: 4},
		{Name: "parent_pid", Type: "pid_t", Class: FieldInteger, Offset: 12, Size: 4, Signed: true},
		{Name: "filename", Type: "const char *", Class: FieldPointer, Offset: 24, Size: 8},
		{Name: "comm", Type: "char[16]", Class: FieldString, Offset: 32, Size: 16},
		{Name: "fsid", Type: "u8[16]", Class: FieldArray, Offset: 48, Size: 16},
		{Name: "argv", Type: "const char *const *", Class: FieldPointer, Offset: 64, Size: 8},
		{Name: "args", Type: "unsigned long[]", Class: FieldArray, Offset: 72, Size: 0},
	}
	if got, wantS := fmt.Sprintf("%+v", tp.Fields), fmt.Sprintf("%+v", want); got != wantS {
		t.Errorf("fields\n got %s\nwant %s", got, wantS)
	}
	if tp.Field("common_pid") != nil || tp.Field("char") != nil {
		t.Error("common fields are left out, and no field is named after a type")
	}
	for _, bad := range []string{
		"field:int;	offset:8;	size:4;	signed:1;",                    // no name
		"field:int x;	offset:-8;	size:4;	signed:1;",                 // negative offset
		"field:int x;	offset:40000;	size:4;	signed:1;",              // beyond 16-bit offsets
		"field:int x;	offset:8;	signed:1;",                          // no size
		"field:__data_loc char[] name;	offset:8;	size:8;	signed:0;", // a data location is 4 bytes
		"field:char * p;	offset:8;	size:2;	signed:0;",               // a 2-byte pointer
	} {
		if _, err := ParseTracepointFormat("g:e", bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestClassifyField(t *testing.T) {
	for _, tt := range []struct {
		typ  string
		size int
		want FieldClass
	}{
		{"int", 4, FieldInteger}, {"unsigned long long", 8, FieldInteger}, {"bool", 1, FieldInteger},
		{"enum xfs_group_type", 4, FieldInteger}, {"const clockid_t", 4, FieldInteger}, {"dev_t", 4, FieldInteger},
		{"void *", 8, FieldPointer}, {"const void*", 8, FieldPointer}, {"struct robust_list_head * *", 8, FieldPointer},
		{"char[16]", 16, FieldString}, {"char[]", 0, FieldString},
		{"unsigned char[6]", 6, FieldArray}, {"__u8[4]", 4, FieldArray}, {"unsigned long[8]", 64, FieldArray},
		{"__data_loc char[]", 4, FieldDataLoc}, {"__data_loc u64[]", 4, FieldDataLoc}, {"__rel_loc char[]", 4, FieldDataLoc}, {"__data_loc", 4, FieldDataLoc},
		{"struct ftrace_graph_ent", 16, FieldStruct}, {"union bpf_attr", 8, FieldStruct},
		{"uuid_t", 16, FieldUnknown}, {"u24", 3, FieldUnknown},
	} {
		if got := ClassifyField(tt.typ, tt.size); got != tt.want {
			t.Errorf("%s (%d bytes) is %s, want %s", tt.typ, tt.size, got, tt.want)
		}
	}
}

// Spellings of one C type are one type: block_bio_complete declares
// nr_sector "unsigned", block_rq_complete "unsigned int".
func TestSameType(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		same bool
	}{
		{"unsigned", "unsigned int", true}, {"long int", "long", true}, {"signed", "int", true},
		{"unsigned long int", "long unsigned", true}, {"long long int", "signed long long", true},
		{"short int", "short", true}, {"const int", "int", true}, {"const char *", "const char  *", true},
		{"dev_t", "dev_t", true}, {"const char *", "char *", true},
		{"unsigned", "int", false}, {"long", "long long", false}, {"char", "signed char", false},
		{"char", "unsigned char", false}, {"pid_t", "int", false}, {"u32", "unsigned int", false},
		{"char[16]", "char[10]", false},
	} {
		if got := SameType(tt.a, tt.b); got != tt.same {
			t.Errorf("SameType(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.same)
		}
	}
}

func TestCheckEvent(t *testing.T) {
	for _, good := range []string{"syscalls:sys_enter_openat", "sched:sched_switch", "my-group:_ev2", "a:" + strings.Repeat("e", MaxEventName)} {
		if err := CheckEvent(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{
		"syscalls", "syscalls:", ":x", "a:b:c", "syscalls:sys_enter_\x00read", "a:" + strings.Repeat("e", 5000),
		"../x:y", "x:../y", "x:y/z", "1a:b", "a:-b", "-a:b", "a:b*", "ftrace:function",
	} {
		if err := CheckEvent(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Every format the host's tracefs has parses, and every field has a class,
// the same wherever its declared type appears. The counts are logged (go test -v -run TestEveryTracefsFormat).
func TestEveryTracefsFormat(t *testing.T) {
	var dir string
	for _, d := range TracefsDirs {
		if _, err := os.Stat(filepath.Join(d, "events")); err == nil {
			dir = d
			break
		}
	}
	if dir == "" && os.Geteuid() == 0 {
		d, err := Tracefs() // mounts it
		if err != nil {
			t.Skipf("no tracefs on this machine: %v", err)
		}
		dir = d
	}
	if dir == "" {
		t.Skip("tracefs is not mounted, and mounting it needs root")
	}
	capture, err := CaptureTracepoints(dir)
	if errors.Is(err, fs.ErrPermission) && os.Geteuid() != 0 {
		t.Skipf("%s/events is not readable without root", dir)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkCapture(t, "the host", capture)
}

// checkCapture parses every format of a capture and checks that every
// field has a class (but typedefs of structs), the same wherever its
// declared type appears; it returns the formats.
func checkCapture(t *testing.T, what string, capture []byte) map[string]*TracepointFormat {
	t.Helper()
	blocks, names, err := splitCapture(capture)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	formats := map[string]*TracepointFormat{}
	classes, types, classOf := map[FieldClass]int{}, map[string]int{}, map[string]FieldClass{}
	fields := 0
	for _, event := range names {
		tp, err := ParseTracepointFormat(event, blocks[event])
		if err != nil {
			t.Errorf("%s: %v", what, err)
			continue
		}
		formats[event] = tp
		for _, f := range tp.Fields {
			fields++
			classes[f.Class]++
			types[f.Type]++
			// uuid_t and guid_t (cxl, ras) are structs of 16 bytes by
			// typedef: "cannot be read", as a struct by value is.
			if f.Class == FieldUnknown && f.Type != "uuid_t" && f.Type != "guid_t" {
				t.Errorf("%s: %s: field %s (%s, %d bytes) has no class", what, event, f.Name, f.Type, f.Size)
			}
			if c, ok := classOf[f.Type]; ok && c != f.Class {
				t.Errorf("%s: %s: field %s: %s is %s here, %s elsewhere", what, event, f.Name, f.Type, f.Class, c)
			}
			classOf[f.Type] = f.Class
		}
	}
	if !testing.Verbose() {
		return formats
	}
	t.Logf("%s: %d formats, %d fields (common_* left out), %d declared types", what, len(names), fields, len(types))
	for _, c := range []FieldClass{FieldInteger, FieldPointer, FieldString, FieldDataLoc, FieldArray, FieldStruct, FieldUnknown} {
		t.Logf("class %-8s %6d", c, classes[c])
	}
	list := make([]string, 0, len(types))
	for typ := range types {
		list = append(list, typ)
	}
	sort.Slice(list, func(i, j int) bool {
		if types[list[i]] != types[list[j]] {
			return types[list[i]] > types[list[j]]
		}
		return list[i] < list[j]
	})
	for _, typ := range list {
		t.Logf("type %6d %s (%s)", types[typ], typ, classOf[typ])
	}
	return formats
}

// An event whose format cannot be read is left out of the facts, with the
// reason kept for the compiler; the others are read.
func TestLoadTracepointsKeepsErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(event, text string) {
		group, name, _ := strings.Cut(event, ":")
		d := filepath.Join(dir, "events", group, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "format"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("g:good", "format:\n\tfield:int x;\toffset:8;\tsize:4;\tsigned:1;\n")
	write("g:garbled", "format:\n\tfield:int x;\toffset:eight;\tsize:4;\tsigned:1;\n")
	if err := os.MkdirAll(filepath.Join(dir, "events", "g", "dir", "format"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, _ := Profile("linux-7.2-amd64")
	f.Source = "live"
	f.LoadTracepointsFrom(dir, []string{"g:good", "g:garbled", "g:dir", "g:missing", "bad\x00name:x", "ftrace:function"})
	if tp, err := f.Tracepoint("g:good"); tp == nil || err != nil {
		t.Errorf("g:good not read: %v", err)
	}
	for _, ev := range []string{"g:garbled", "g:dir", "bad\x00name:x", "ftrace:function"} {
		if tp, err := f.Tracepoint(ev); f.Tracepoints[ev] != nil || tp != nil || err == nil || errors.Is(err, ErrNoTracepoint) {
			t.Errorf("%q: format %v, error %v", ev, f.Tracepoints[ev], err)
		}
	}
	if _, err := f.Tracepoint("g:missing"); !errors.Is(err, ErrNoTracepoint) {
		t.Errorf("g:missing: %v; a missing event is the compiler's to report", err)
	}
}

func TestFactsFileChecks(t *testing.T) {
	f, _ := Profile("linux-7.2-amd64")
	f.Tracepoints = map[string]*TracepointFormat{"g:e": {Event: "g:e", Fields: []TracepointField{
		{Name: "comm", Type: "char[16]", Class: FieldInteger, Offset: 8, Size: 16}, // a wrong class
	}}}
	path := filepath.Join(t.TempDir(), "facts.json")
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	g, err := ReadFactsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if tp, err := g.Tracepoint("g:e"); err != nil || tp.Field("comm").Class != FieldString {
		t.Errorf("class from the file kept: %+v, %v", tp, err)
	}
	for _, breakIt := range []func(*Facts){
		func(f *Facts) { f.CPUs = MaxCPUs + 1 },
		func(f *Facts) { f.CPUs = -1 },
		func(f *Facts) { f.Tracepoints["g:e"].Fields[0].Offset = 1 << 20 },
		// offset + size wraps around to a small number (the red team's case)
		func(f *Facts) {
			f.Tracepoints["g:e"].Fields[0].Offset, f.Tracepoints["g:e"].Fields[0].Size = 9223372036854775800, 8
		},
	} {
		bad, _ := Profile("linux-7.2-amd64")
		bad.Tracepoints = map[string]*TracepointFormat{"g:e": {Event: "g:e", Fields: []TracepointField{{Name: "x", Type: "int", Offset: 8, Size: 4}}}}
		breakIt(bad)
		if err := bad.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFactsFile(path); err == nil {
			t.Errorf("facts accepted: CPUs %d, field %+v", bad.CPUs, bad.Tracepoints["g:e"].Fields[0])
		}
	}
}
