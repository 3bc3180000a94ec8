package runtime

import (
	"math/rand/v2"
	"regexp"
	"testing"
	"time"
)

// TestNamesMatchTheirRegexps: the hand-written checks accept exactly what
// the regexps they replace accept, on edge cases and on random strings
// over the characters that matter (seed logged).
func TestNamesMatchTheirRegexps(t *testing.T) {
	checks := []struct {
		re *regexp.Regexp
		fn func(string) bool
	}{
		{regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`), isWorkspaceName},
		{regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,200}$`), isMapRef},
		{regexp.MustCompile(`^link_[0-9]{1,7}$`), isLinkPin},
		{regexp.MustCompile(`^(kernel|user|tracepoint|profile|table|events)-[A-Za-z0-9_]{1,128}-[0-9]{1,19}$`), isProbeDir},
	}
	edge := []string{"", "a", "-", "_", "0", "link_", "link_1", "link_12345678", "link_1234567", "kernel-a-1", "kernel--1", "kernel-a-",
		"events-x_y-0123456789012345678", "events-x_y-01234567890123456789", "table-a-b-1", "user-é-1", "a\n", "kernel-a-1\n",
		"tracepoint-x-9"}
	for n := 60; n <= 70; n++ {
		edge = append(edge, "w"+string(repeat('a', n)))
	}
	for n := 126; n <= 130; n++ {
		edge = append(edge, "profile-"+string(repeat('Z', n))+"-7")
	}
	for n := 199; n <= 203; n++ {
		edge = append(edge, string(repeat('m', n)))
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	const alphabet = "aZ09_-é\nkernelusertracepointprofiletableventslink"
	pieces := []string{"kernel-", "user-", "events-", "table-", "link_", "-", "_", "1", "x"}
	for i := 0; i < 20000; i++ {
		var s []byte
		for j := r.IntN(12); j > 0; j-- {
			if r.IntN(2) == 0 {
				s = append(s, pieces[r.IntN(len(pieces))]...)
			} else {
				s = append(s, alphabet[r.IntN(len(alphabet))])
			}
		}
		edge = append(edge, string(s))
	}
	for _, s := range edge {
		for _, c := range checks {
			if want, got := c.re.MatchString(s), c.fn(s); want != got {
				t.Errorf("%q: %s says %v, the check %v", s, c.re, want, got)
			}
		}
	}
}

func repeat(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}
