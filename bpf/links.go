package bpf

// LinkFact is one field of [Links] as every display names it: probectl
// target's Links and Missing lines and the plan's header loop over
// [LinkFacts], and the compiler's link families name the one that enables
// them.
type LinkFact struct {
	Name string // "fentry/fexit"
	Has  func(Links) bool
}

// LinkFacts is every field of Links, in the order displays show them.
var LinkFacts = []LinkFact{
	{"kprobe.multi", func(l Links) bool { return l.KprobeMulti }},
	{"kprobe.session", func(l Links) bool { return l.KprobeSession }},
	{"fentry/fexit", func(l Links) bool { return l.Fentry }},
	{"fsession", func(l Links) bool { return l.Fsession }},
	{"kprobe", func(l Links) bool { return l.Kprobe }},
	{"uprobe.multi", func(l Links) bool { return l.UprobeMulti }},
	{"uprobe.session", func(l Links) bool { return l.UprobeSession }},
	{"uprobe", func(l Links) bool { return l.Uprobe }},
	{"tracepoint", func(l Links) bool { return l.Tracepoint }},
	{"raw_tracepoint", func(l Links) bool { return l.RawTracepoint }},
	{"tp_btf", func(l Links) bool { return l.TPBtf }},
}

// LinkFactNamed returns the entry of LinkFacts called name.
func LinkFactNamed(name string) (LinkFact, bool) {
	for _, lf := range LinkFacts {
		if lf.Name == name {
			return lf, true
		}
	}
	return LinkFact{}, false
}

// Split returns the display names of the link families l has and lacks,
// in the order of LinkFacts.
func (l Links) Split() (have, lack []string) {
	for _, lf := range LinkFacts {
		if lf.Has(l) {
			have = append(have, lf.Name)
		} else {
			lack = append(lack, lf.Name)
		}
	}
	return have, lack
}
