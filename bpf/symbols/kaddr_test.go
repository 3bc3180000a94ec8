package symbols

import (
	"strings"
	"testing"
)

// kernelAddresses reads every kind of symbol (data too, the first of a
// name listed twice), and refuses a missing name and a hidden address by
// name.
func TestKernelAddresses(t *testing.T) {
	text := "ffffffff81000000 T _text\nffffffff83a1b2c0 D avenrun\nffffffff83a1b2d0 d avenrun\nffffffffc0201000 t name\t[mod]\n0000000000000000 D hidden\nzz D bad\n"
	got, err := kernelAddresses(strings.NewReader(text), []string{"avenrun", "_text"})
	if err != nil || got["avenrun"] != 0xffffffff83a1b2c0 || got["_text"] != 0xffffffff81000000 {
		t.Fatalf("got %x, %v", got, err)
	}
	for _, tc := range []struct{ name, want string }{
		{"nosuch", `kernel symbol "nosuch" is not in /proc/kallsyms`},
		{"hidden", `kernel symbol "hidden": /proc/kallsyms hides its address`},
		{"bad", `bad: bad address "zz"`},
	} {
		if _, err := kernelAddresses(strings.NewReader(text), []string{"avenrun", tc.name}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}
