package compiled

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// FamilyName is the metric family of an aggregation, without the unit and
// the _total of counters: probectl_<kind>_<probe kind>_<probe
// name>_<aggregation>. Each part keeps ASCII letters, digits and '_' and
// turns anything else into '_'; a part that changed gets '_' and 8 hex
// digits of a hash of the original, so two names never meet.
func FamilyName(probeKind, probeName, aggKind, aggName string) string {
	parts := []string{"probectl", sanitize(aggKind), sanitize(probeKind), sanitize(probeName), sanitize(aggName)}
	return strings.Join(parts, "_")
}

// ServedName is the family a scrape serves the aggregation of the probe at
// addr as, unless it meets another's (then it gets a number before the
// unit): FamilyName, then _BASEUNIT for a unit (_seconds, _bytes), then
// _total for a counter.
func (a *Aggregation) ServedName(probeKind, probeName string) string {
	name := FamilyName(probeKind, probeName, string(a.Kind), a.Name) + a.UnitSuffix()
	if a.Monotonic() {
		name += "_total"
	}
	return name
}

// UnitSuffix is "_" and the base unit a scrape serves the values in, ""
// without a unit.
func (a *Aggregation) UnitSuffix() string {
	if a.BaseUnit == "" {
		return ""
	}
	return "_" + a.BaseUnit
}

// Served is v as a scrape serves it: in the base unit.
func (a *Aggregation) Served(v float64) float64 {
	if a.PerBase > 1 {
		return v / float64(a.PerBase)
	}
	return v
}

// CleanName turns every byte that is not an ASCII letter, digit or '_'
// into '_'.
func CleanName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

func sanitize(s string) string {
	c := CleanName(s)
	if c == s && s != "" {
		return c
	}
	h := fnv.New32a()
	h.Write([]byte(s))
	return fmt.Sprintf("%s_%08x", c, h.Sum32())
}
