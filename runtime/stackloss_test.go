package runtime

import (
	"encoding/binary"
	"encoding/json"
	"testing"

	"github.com/probectl/probectl/compiler/compiled"
	"golang.org/x/sys/unix"
)

// TestStackLossInJSON: a stack bpf_get_stackid could not record keeps its
// reason in JSON, as a kind and the text show prints.
func TestStackLossInJSON(t *testing.T) {
	for _, c := range []struct {
		errno unix.Errno
		user  bool
		lost  string
		text  string
	}{
		{unix.ENOMEM, true, "full", "stack lost: stack map full"},
		{unix.EEXIST, false, "collision", "stack lost: hash collision in the stack map"},
		{unix.EFAULT, true, "no stack", "no user stack"},
		{unix.EFAULT, false, "no stack", "no kernel stack"},
		{unix.ENOENT, false, "no stack", "no stack stored"},
		{unix.E2BIG, false, "full", "stack lost: stack map full"}, // a stack map stored by content
		{unix.EBUSY, false, "other", "stack lost: " + unix.EBUSY.Error()},
	} {
		raw := make([]byte, 16)
		binary.LittleEndian.PutUint64(raw, uint64(-int64(c.errno)))
		kind := compiled.KeyKStack
		if c.user {
			kind = compiled.KeyUStack
		}
		s := decodeStack(compiled.KeyField{Kind: kind, StackMap: "x"}, raw)
		if s.Lost() != c.lost || s.Err != c.text || s.String() != "["+c.text+"]" {
			t.Errorf("errno %v: lost %q err %q text %q, want %q %q", c.errno, s.Lost(), s.Err, s.String(), c.lost, c.text)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var got []map[string]string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("errno %v: %s: %v", c.errno, b, err)
		}
		if len(got) != 1 || got[0]["lost"] != c.lost || got[0]["reason"] != c.text {
			t.Errorf("errno %v: JSON %s, want one element lost %q reason %q", c.errno, b, c.lost, c.text)
		}
	}
	// A recorded stack has no loss.
	ok := &Stack{Frames: nil}
	if ok.Lost() != "" {
		t.Errorf("a stack without error: lost %q", ok.Lost())
	}
	if b, _ := json.Marshal(ok); string(b) != "[]" {
		t.Errorf("a stack without frames or error: %s, want []", b)
	}
}

// TestStacksLostCounted: an aggregation counts its lost stacks by kind,
// in samples for a count.
func TestStacksLostCounted(t *testing.T) {
	lost := func(errno unix.Errno) *Stack {
		raw := make([]byte, 16)
		binary.LittleEndian.PutUint64(raw, uint64(-int64(errno)))
		return decodeStack(compiled.KeyField{Kind: compiled.KeyUStack, StackMap: "x"}, raw)
	}
	v := func(n int64) *int64 { return &n }
	ar := &AggregationResult{Kind: compiled.AggCount}
	for _, e := range []Entry{
		{Key: OrderedKey{{Name: "s", Value: lost(unix.ENOMEM)}}, Value: v(7)},
		{Key: OrderedKey{{Name: "s", Value: lost(unix.ENOMEM)}}, Value: v(5)},
		{Key: OrderedKey{{Name: "s", Value: lost(unix.EEXIST)}}, Value: v(3)},
		{Key: OrderedKey{{Name: "s", Value: lost(unix.EFAULT)}}, Value: v(2)},
		{Key: OrderedKey{{Name: "s", Value: &Stack{Frames: nil}}}, Value: v(100)},
	} {
		ar.countLost(e)
	}
	want := map[string]int64{"full": 12, "collision": 3, "no stack": 2}
	if len(ar.StacksLost) != len(want) {
		t.Fatalf("StacksLost %v, want %v", ar.StacksLost, want)
	}
	for k, n := range want {
		if ar.StacksLost[k] != n {
			t.Errorf("StacksLost %v, want %v", ar.StacksLost, want)
		}
	}
	b, _ := json.Marshal(ar)
	var got struct {
		StacksLost map[string]int64 `json:"stacks_lost"`
	}
	if err := json.Unmarshal(b, &got); err != nil || got.StacksLost["full"] != 12 {
		t.Errorf("JSON %s: stacks_lost %v (%v)", b, got.StacksLost, err)
	}
}
