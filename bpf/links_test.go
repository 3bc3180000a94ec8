package bpf

import (
	"reflect"
	"testing"
)

// TestLinkFactsCoverLinks holds every field of Links to exactly one entry
// of LinkFacts, the list every display loops over: a field added without
// a display (as uprobe.session once was, missing from probectl target and
// the plan's header) fails here.
func TestLinkFactsCoverLinks(t *testing.T) {
	typ := reflect.TypeOf(Links{})
	shown := map[string]string{}
	for i := range typ.NumField() {
		field := typ.Field(i)
		if field.Type.Kind() != reflect.Bool {
			t.Fatalf("Links.%s is a %s: LinkFacts shows booleans only", field.Name, field.Type)
		}
		var l Links
		reflect.ValueOf(&l).Elem().Field(i).SetBool(true)
		have, lack := l.Split()
		if len(have) != 1 {
			t.Errorf("Links.%s alone shows as %q: want exactly one entry of LinkFacts", field.Name, have)
			continue
		}
		if len(have)+len(lack) != len(LinkFacts) {
			t.Errorf("Links.%s: %d shown of %d", field.Name, len(have)+len(lack), len(LinkFacts))
		}
		if prev, dup := shown[have[0]]; dup {
			t.Errorf("%q shows both Links.%s and Links.%s", have[0], prev, field.Name)
		}
		shown[have[0]] = field.Name
		if _, ok := LinkFactNamed(have[0]); !ok {
			t.Errorf("LinkFactNamed(%q) finds nothing", have[0])
		}
	}
	if len(shown) != len(LinkFacts) {
		t.Errorf("LinkFacts has %d entries and Links %d fields", len(LinkFacts), len(shown))
	}
	if have, _ := (Links{}).Split(); len(have) != 0 {
		t.Errorf("no links shows %q", have)
	}
}
