package runtime

import (
	"encoding/binary"
	"syscall"
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

// cgroup_path shows the cgroup2 path of an id (the directory's inode), and
// an id it cannot find as itself.
func TestDecodeCgroup(t *testing.T) {
	var st syscall.Stat_t
	if err := syscall.Stat("/sys/fs/cgroup", &st); err != nil {
		t.Skipf("no cgroup2 mount: %v", err)
	}
	var fs syscall.Statfs_t
	if syscall.Statfs("/sys/fs/cgroup", &fs) != nil || fs.Type != 0x63677270 {
		t.Skip("/sys/fs/cgroup is not cgroup2")
	}
	f := compiler.KeyField{Decode: "cgroup"}
	if got := decodeCgroup(f, le(int64(st.Ino))); got != "/" {
		t.Errorf("root cgroup %d = %v, want /", st.Ino, got)
	}
	cgroups.scanned = cgroups.scanned.Add(-cgroupRescan)
	if got := decodeCgroup(f, le(1)); got != "cgroup 1" {
		t.Errorf("id 1 = %v", got)
	}
}
