package bpf

import (
	"fmt"
	"strings"
)

// Kind is the kind of thing a probe attaches to.
type Kind string

// The probe kinds.
const (
	KindKernel     Kind = "kernel"
	KindUser       Kind = "user"
	KindTracepoint Kind = "tracepoint"
	// KindTable is not a probe: a table the probes of a spec set share
	// has an address too ("table.queued_at"), in plans and state.
	KindTable Kind = "table"
	// KindEvents is not a probe either: the event buffer the probes of a
	// spec set share ("events.buffer").
	KindEvents Kind = "events"
)

// Kinds lists every probe kind, in the order plans list them.
var Kinds = []Kind{KindKernel, KindUser, KindTracepoint}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	for _, known := range Kinds {
		if k == known {
			return true
		}
	}
	return false
}

// Address names one probe: its kind and its name, written "kernel.vfs_latency".
type Address struct {
	Kind Kind
	Name string
}

func (a Address) String() string { return string(a.Kind) + "." + a.Name }

// Less orders addresses by kind, then name.
func (a Address) Less(b Address) bool {
	if a.Kind != b.Kind {
		return kindOrder(a.Kind) < kindOrder(b.Kind)
	}
	return a.Name < b.Name
}

func kindOrder(k Kind) int {
	if k == KindTable {
		return -1 // tables first: probes use them
	}
	if k == KindEvents {
		return -2 // and the event buffer before them
	}
	for i, known := range Kinds {
		if k == known {
			return i
		}
	}
	return len(Kinds)
}

// ParseAddress parses "KIND.NAME".
func ParseAddress(s string) (Address, error) {
	kind, name, ok := strings.Cut(s, ".")
	if !ok || name == "" {
		return Address{}, fmt.Errorf("address %q: want KIND.NAME, e.g. kernel.vfs_latency", s)
	}
	a := Address{Kind: Kind(kind), Name: name}
	if !a.Kind.Valid() && a.Kind != KindTable && a.Kind != KindEvents {
		return Address{}, fmt.Errorf("address %q: unknown kind %q (want kernel, user, tracepoint or table)", s, kind)
	}
	if !ValidName(name) {
		return Address{}, fmt.Errorf("address %q: name must be letters, digits and underscores", s)
	}
	return a, nil
}

// ValidName reports whether s is a valid probe or aggregation name:
// a letter or underscore, then letters, digits and underscores.
func ValidName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// MarshalText implements encoding.TextMarshaler.
func (a Address) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (a *Address) UnmarshalText(b []byte) error {
	parsed, err := ParseAddress(string(b))
	if err != nil {
		return err
	}
	*a = parsed
	return nil
}
