package compiler

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// Tables, strings and field reads, generated and run in the kernel
// (BPF_PROG_RUN, the probe's program loaded as a raw tracepoint whose
// context is a record the test lays out: sys_enter_read's fd at 16, buf at
// 24, count at 32), against what the spec means.

// userText is user memory a record's pointer field points at.
var userText = []byte("hello world\x00and after")

// runRecord runs src's program n times with a sys_enter_read record of fd,
// a pointer to buf and count, and returns the total of its aggregation
// named agg (0 when it has no key).
func runRecord(t *testing.T, src string, fd int64, buf []byte, count int64, n int, agg string) int64 {
	t.Helper()
	facts, _ := bpf.Profile("linux-7.2-amd64")
	cfg, diags := spec.Parse(map[string][]byte{"t.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out, diags := Compile(cfg, facts)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	p := out.Probes[0]
	cs, err := p.CollectionSpec(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	prog := cs.Programs["event"]
	prog.Type, prog.AttachType = ebpf.RawTracepoint, ebpf.AttachNone
	coll, err := ebpf.NewCollection(cs)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	defer coll.Close()
	record := make([]byte, 48)
	binary.LittleEndian.PutUint64(record[16:], uint64(fd))
	if buf != nil {
		// A copy, written here: the program's read of user memory cannot
		// fault a page in, and a package variable's page may never have
		// been touched (so it read nothing once the binary's layout moved).
		buf = append([]byte(nil), buf...)
		binary.LittleEndian.PutUint64(record[24:], uint64(uintptr(unsafe.Pointer(&buf[0]))))
	}
	binary.LittleEndian.PutUint64(record[32:], uint64(count))
	for range n {
		if _, err := coll.Programs["event"].Run(&ebpf.RunOptions{Context: record}); err != nil {
			t.Fatalf("run: %v", err)
		}
	}
	goruntime.KeepAlive(buf)
	for _, a := range p.Aggregations {
		if a.Name != agg {
			continue
		}
		key := make([]byte, a.KeySize)
		total, err := aggTotal(coll.Maps[a.MapRef], key)
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return 0
		} else if err != nil {
			t.Fatal(err)
		}
		return total
	}
	t.Fatalf("no aggregation %s", agg)
	return 0
}

func readProbe(body string) string {
	return "table \"t\" {}\n\nprobe \"tracepoint\" \"p\" {\n  event = \"syscalls:sys_enter_read\"\n  on_entry {\n" + body + "\n  }\n}\n"
}

func TestStringsRun(t *testing.T) {
	requireRoot(t)
	for _, tt := range []struct {
		cond string
		want bool
	}{
		{`str(args.buf) == "hello world"`, true},
		{`str(args.buf) == "hello worl"`, false},
		{`str(args.buf) == "hello world!"`, false},
		{`str(args.buf) != "hello world"`, false},
		{`str(args.buf, 6) == "hello"`, true},
		{`user_str(args.buf) == "hello world"`, true},
		{`starts_with(str(args.buf), "hello w")`, true},
		{`starts_with(str(args.buf), "hello world")`, true},
		{`starts_with(str(args.buf), "hello world and")`, false},
		{`starts_with(str(args.buf), "hellO")`, false},
		{`starts_with(str(args.buf, 3), "he")`, true},
	} {
		src := readProbe(fmt.Sprintf("    store \"t\" {\n      key = [1]\n      value = 1\n    }\n    count \"c\" { when = %s && has(t, [1]) }", tt.cond))
		want := int64(0)
		if tt.want {
			want = 3
		}
		if got := runRecord(t, src, 0, userText, 0, 3, "c"); got != want {
			t.Errorf("%s: counted %d of 3, want %d", tt.cond, got, want)
		}
	}
}

func TestTablesRun(t *testing.T) {
	requireRoot(t)
	const fd, count, n = 7, 40, 5
	pid := int64(os.Getpid())
	for _, tt := range []struct {
		body string
		want int64
	}{
		// store, then read what was stored: the value and has().
		{`    store "t" {
      key   = [args.fd]
      value = args.count + pid
    }
    sum "s" { value = t[args.fd] + (has(t, [args.fd]) ? 1000 : 0) }`, n * (count + pid + 1000)},
		// a missing key reads 0 and has() says so.
		{`    store "t" {
      key   = [args.fd]
      value = 1
    }
    sum "s" { value = t[args.fd + 1] + (has(t, [args.fd + 1]) ? 1000 : 0) }`, 0},
		// delete, then nothing is there.
		{`    store "t" {
      key   = [args.fd]
      value = 5
    }
    delete "t" { key = [args.fd] }
    sum "s" { value = t[args.fd] + (has(t, [args.fd]) ? 1000 : 0) }`, 0},
		// objects, and composite keys with a string.
		{`    store "t" {
      key   = [args.fd, str(args.buf)]
      value = { a = args.count, b = 3 }
    }
    sum "s" { value = t[[args.fd, str(args.buf)]].a * 10 + t[[args.fd, str(args.buf)]].b }`, n * (count*10 + 3)},
		// a string value, compared.
		{`    store "t" {
      key   = [args.fd]
      value = str(args.buf)
    }
    sum "s" { value = t[args.fd] == "hello world" ? 2 : 1 }`, n * 2},
		// every store adds to what the last left: a counter in a table.
		{`    store "t" {
      key   = [args.fd]
      value = t[args.fd] + 1
    }
    sum "s" { value = t[args.fd] }`, 1 + 2 + 3 + 4 + 5},
	} {
		if got := runRecord(t, readProbe(tt.body), fd, userText, count, n, "s"); got != tt.want {
			t.Errorf("%s\n  sum = %d, want %d", tt.body, got, tt.want)
		}
	}
}

// A table that is full refuses the new key, and the store is counted.
func TestTableFullCounted(t *testing.T) {
	requireRoot(t)
	src := `table "t" {
  max_keys = 2
}

probe "tracepoint" "p" {
  event = "syscalls:sys_enter_read"
  on_entry {
    store "t" {
      key   = [args.fd]
      value = 1
    }
    count "c" { when = has(t, [args.fd]) }
  }
}`
	facts, _ := bpf.Profile("linux-7.2-amd64")
	cfg, _ := spec.Parse(map[string][]byte{"t.hcl": []byte(src)})
	out, diags := Compile(cfg, facts)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	cs, err := out.Probes[0].CollectionSpec(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs.Programs["event"].Type = ebpf.RawTracepoint
	coll, err := ebpf.NewCollection(cs)
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	for fd := range 5 {
		record := make([]byte, 48)
		binary.LittleEndian.PutUint64(record[16:], uint64(fd))
		if _, err := coll.Programs["event"].Run(&ebpf.RunOptions{Context: record}); err != nil {
			t.Fatal(err)
		}
	}
	var perCPU []uint64
	if err := coll.Maps[tableStatsRef("t")].Lookup(uint32(0), &perCPU); err != nil {
		t.Fatal(err)
	}
	var refused uint64
	for _, v := range perCPU {
		refused += v
	}
	if refused != 3 {
		t.Errorf("a table of 2 keys refused %d of 5 stores, want 3", refused)
	}
}

// Tracepoint fields that are strings (char[N], __data_loc char[]) and byte
// arrays, read from a record the test lays out, as keys and in
// comparisons.
func TestFieldTextRun(t *testing.T) {
	requireRoot(t)
	facts, _ := bpf.Profile("linux-7.2-amd64")
	tp, err := bpf.ParseTracepointFormat("test:text", `format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:char comm[16];	offset:8;	size:16;	signed:0;
	field:__data_loc char[] path;	offset:24;	size:4;	signed:0;
	field:u8 addr[4];	offset:28;	size:4;	signed:0;
`)
	if err != nil {
		t.Fatal(err)
	}
	facts.Tracepoints = map[string]*bpf.TracepointFormat{tp.Event: tp}
	src := `probe "tracepoint" "p" {
  event = "test:text"
  on_entry {
    count "c" {
      when = args.comm == "worker" && str(args.path) == "/tmp/file" && starts_with(args.path, "/tmp/")
      by   = [args.comm, args.path, args.addr]
    }
  }
}`
	cfg, diags := spec.Parse(map[string][]byte{"t.hcl": []byte(src)})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	out, diags := Compile(cfg, facts)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	cs, err := out.Probes[0].CollectionSpec(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// As a tracepoint program, the verifier accepts it (a __data_loc is read
	// at ctx + its offset)...
	tpColl, err := ebpf.NewCollection(cs)
	if err != nil {
		t.Fatalf("as a tracepoint program: %v", err)
	}
	tpColl.Close()
	// ... and as a raw tracepoint, the test can run it on its record.
	cs.Programs["event"].Type = ebpf.RawTracepoint
	coll, err := ebpf.NewCollection(cs)
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	record := make([]byte, 64)
	copy(record[8:], "worker")
	path := "/tmp/file\x00"
	binary.LittleEndian.PutUint32(record[24:], uint32(len(path))<<16|40)
	copy(record[28:], []byte{10, 0, 0, 7})
	copy(record[40:], path)
	for range 4 {
		if _, err := coll.Programs["event"].Run(&ebpf.RunOptions{Context: record}); err != nil {
			t.Fatal(err)
		}
	}
	agg := out.Probes[0].Aggregations[0]
	n := 0
	err = aggEach(coll.Maps[agg.MapRef], func(key []byte, values [][]byte) {
		n++
		comm := string(key[agg.Key[0].Offset : agg.Key[0].Offset+6])
		pth := string(key[agg.Key[1].Offset : agg.Key[1].Offset+9])
		addr := key[agg.Key[2].Offset : agg.Key[2].Offset+4]
		var total uint64
		for _, v := range values {
			total += binary.LittleEndian.Uint64(v)
		}
		if comm != "worker" || pth != "/tmp/file" || fmt.Sprint(addr) != "[10 0 0 7]" || total != 4 {
			t.Errorf("key %q %q %v counted %d, want worker /tmp/file [10 0 0 7] 4", comm, pth, addr, total)
		}
		if agg.Key[1].Size != spec.DefaultStrSize || key[agg.Key[1].Offset+9] != 0 {
			t.Errorf("the path's slot is %d bytes, NUL after it %d", agg.Key[1].Size, key[agg.Key[1].Offset+9])
		}
	})
	if err != nil || n != 1 {
		t.Errorf("%d keys (%v), want 1", n, err)
	}
}

// aggTotal adds up key's first word in an aggregation's map over its
// values: one per CPU in a per-CPU hash, one shared by every CPU in a
// plain hash (compiled.Aggregation.SharedValue). A missing key is
// ebpf.ErrKeyNotExist.
func aggTotal(m *ebpf.Map, key any) (int64, error) {
	var total int64
	if m.Type() == ebpf.Hash {
		var v []byte
		err := m.Lookup(key, &v)
		if err == nil {
			total = int64(binary.LittleEndian.Uint64(v))
		}
		return total, err
	}
	var per [][]byte
	if err := m.Lookup(key, &per); err != nil {
		return 0, err
	}
	for _, v := range per {
		total += int64(binary.LittleEndian.Uint64(v))
	}
	return total, nil
}

// aggEach calls fn with every key of an aggregation's map and its values
// (one per CPU, or the one shared: aggTotal).
func aggEach(m *ebpf.Map, fn func(key []byte, values [][]byte)) error {
	var key []byte
	it := m.Iterate()
	if m.Type() == ebpf.Hash {
		var v []byte
		for it.Next(&key, &v) {
			fn(key, [][]byte{v})
		}
		return it.Err()
	}
	var per [][]byte
	for it.Next(&key, &per) {
		fn(key, per)
	}
	return it.Err()
}
