package spec_test

import (
	"testing"

	"github.com/probectl/probectl/spec"
)

// Literals are 64-bit integers: -9223372036854775808 is one, written as
// the negation of a number that alone would not be.
func TestIntegerLiterals(t *testing.T) {
	for src, want := range map[string]int64{
		"-9223372036854775808": -9223372036854775808,
		"9223372036854775807":  9223372036854775807,
		"-5":                   -5,
		"1e3":                  1000,
	} {
		cfg, diags := spec.Parse(map[string][]byte{"n.hcl": []byte(tracepointValue(src))})
		if diags.HasErrors() {
			t.Errorf("%s: %v", src, diags)
			continue
		}
		lit, ok := cfg.Probes[0].Entry.Actions[0].Value.(*spec.IntLit)
		if !ok || lit.Value != want {
			t.Errorf("%s: %#v, want %d", src, cfg.Probes[0].Entry.Actions[0].Value, want)
		}
	}
	// A negation of anything else is arithmetic, which wraps.
	cfg, diags := spec.Parse(map[string][]byte{"n.hcl": []byte(tracepointValue("-(-9223372036854775808)"))})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if u, ok := cfg.Probes[0].Entry.Actions[0].Value.(*spec.Unary); !ok || u.Op != spec.OpNeg {
		t.Errorf("-(-9223372036854775808) is %#v, want a negation", cfg.Probes[0].Entry.Actions[0].Value)
	}
}
