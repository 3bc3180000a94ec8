package runtime

import (
	"encoding/binary"
	"fmt"
	"sort"
	"testing"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
)

// le is n as an 8-byte slot.
func le(n int64) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(n))
	return b
}

// Each decoder on known values, and on values it does not know (shown as
// the number, named).
func TestDecoders(t *testing.T) {
	syscalls := compiler.KeyField{Decode: "syscall", Labels: bpf.SyscallNames(bpf.ArchX86_64)}
	labels := compiler.KeyField{Decode: "labels", Labels: map[string]string{"1": "HUP", "-1": "NONE"}}
	// 10.0.0.1:443, as struct sock keeps them: the address's bytes in
	// order, the port big-endian, each loaded into a 64-bit slot.
	inet := append([]byte{10, 0, 0, 1, 0, 0, 0, 0}, le(int64(binary.LittleEndian.Uint16([]byte{0x01, 0xbb})))...)
	v6 := make([]byte, 24)
	v6[15] = 1 // ::1
	copy(v6[16:], []byte{0x1f, 0x90})
	for _, c := range []struct {
		f    compiler.KeyField
		raw  []byte
		want string
	}{
		{compiler.KeyField{Decode: "errno"}, le(-2), "ENOENT"},
		{compiler.KeyField{Decode: "errno"}, le(13), "EACCES"},
		{compiler.KeyField{Decode: "errno"}, le(-512), "ERESTARTSYS"},
		{compiler.KeyField{Decode: "errno"}, le(0), "0"},
		{compiler.KeyField{Decode: "errno"}, le(-4000), "errno -4000"},
		{compiler.KeyField{Decode: "signal"}, le(9), "SIGKILL"},
		{compiler.KeyField{Decode: "signal"}, le(0), "N/A"},
		{compiler.KeyField{Decode: "signal"}, le(34), "SIGRTMIN+2"},
		{compiler.KeyField{Decode: "signal"}, le(99), "signal 99"},
		{syscalls, le(257), "openat"},
		{syscalls, le(62), "kill"},
		{syscalls, le(9999), "syscall 9999"},
		{labels, le(1), "HUP"},
		{labels, le(-1), "NONE"},
		{labels, le(7), "7"},
		{compiler.KeyField{Decode: "hex"}, le(255), "0xff"},
		{compiler.KeyField{Decode: "hex"}, le(-1), "0xffffffffffffffff"},
		{compiler.KeyField{Decode: "inet"}, []byte{127, 0, 0, 1, 0, 0, 0, 0}, "127.0.0.1"},
		{compiler.KeyField{Decode: "inet"}, []byte{192, 168, 1, 2}, "192.168.1.2"},
		{compiler.KeyField{Decode: "inet"}, inet, "10.0.0.1:443"},
		{compiler.KeyField{Decode: "inet6"}, v6[:16], "::1"},
		{compiler.KeyField{Decode: "inet6"}, v6, "[::1]:8080"},
	} {
		dec := decoders[c.f.Decode]
		if got := dec(c.f, c.raw); got != c.want {
			t.Errorf("%s(%x) = %v, want %s", c.f.Decode, c.raw, got, c.want)
		}
	}
}

// A histogram shows every bucket from the lowest non-empty one to the
// highest, as bpftrace does; a span no histogram has shows as it is.
func TestShownBuckets(t *testing.T) {
	for _, c := range []struct {
		counts map[int64]uint64
		want   []int64
	}{
		{map[int64]uint64{}, nil},
		{map[int64]uint64{3: 1}, []int64{3}},
		{map[int64]uint64{2: 1, 6: 4}, []int64{2, 3, 4, 5, 6}},
		{map[int64]uint64{0: 1, 64: 1}, nil}, // 65 buckets
		{map[int64]uint64{0: 1, 1 << 40: 1}, []int64{0, 1 << 40}},
		{map[int64]uint64{-1 << 63: 1, 1<<63 - 1: 1}, []int64{-1 << 63, 1<<63 - 1}},
	} {
		got := shownBuckets(c.counts)
		sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
		if c.want == nil && len(c.counts) == 2 {
			if len(got) != 65 {
				t.Errorf("%v: %d buckets, want 65", c.counts, len(got))
			}
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("%v: %v, want %v", c.counts, got, c.want)
		}
	}
}
