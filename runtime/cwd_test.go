package runtime

import (
	"testing"

	"github.com/probectl/probectl/compiler"
)

// A cwd key or field: the names leaf first, each NUL-ended, read as the
// path from the root; no names is the root; what follows the first empty
// name (the zeroed rest of the slot, or a stale byte) is not read.
func TestDecodePath(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"d2\x00d1\x00loops-mnt\x00tmp\x00\x00\x00\x00\x00", "/tmp/loops-mnt/d1/d2"},
		{"\x00\x00\x00\x00\x00\x00\x00\x00", "/"},
		{"a\x00\x00stale\x00\x00\x00", "/a"},
		{"only", "/only"}, // a slot filled to its end: the last name unended
	} {
		f := compiler.KeyField{Name: "cwd", Kind: compiler.KeyPath, Offset: 0, Size: len(tc.raw)}
		if got := decodeKey([]compiler.KeyField{f}, []byte(tc.raw), nil); got[0].Value != tc.want {
			t.Errorf("%q: %v, want %s", tc.raw, got[0].Value, tc.want)
		}
	}
}
