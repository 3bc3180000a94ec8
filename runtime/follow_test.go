package runtime

import "testing"

// TestSameRecordLine: a record read again after a kill -9 is known by its
// line but for the wall time (another reader's clock sample); a field
// named wall is a field, not the time.
func TestSameRecordLine(t *testing.T) {
	a := `{"type":"event","probe":"tracepoint.p","event":"e","mono_ns":12,"wall":"2026-12-01T00:00:00.000000001Z","fields":{"wall":"x","n":1}}`
	for b, want := range map[string]bool{
		`{"type":"event","probe":"tracepoint.p","event":"e","mono_ns":12,"wall":"2026-12-01T00:00:00.000000009Z","fields":{"wall":"x","n":1}}`: true,
		`{"type":"event","probe":"tracepoint.p","event":"e","mono_ns":13,"wall":"2026-12-01T00:00:00.000000001Z","fields":{"wall":"x","n":1}}`: false,
		`{"type":"event","probe":"tracepoint.p","event":"e","mono_ns":12,"wall":"2026-12-01T00:00:00.000000001Z","fields":{"wall":"y","n":1}}`: false,
		`{"type":"summary","events":1}`: false,
	} {
		if got := sameRecordLine([]byte(a), []byte(b)); got != want {
			t.Errorf("%s: %v, want %v", b, got, want)
		}
	}
}
