package buildinfo

import (
	"encoding/json"
	"runtime/debug"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestFrom: the -X version wins, then the main module's, then "(devel)";
// the -X commit and modified win over go build's VCS stamp (wrong in a
// worktree nested in another checkout), and a build with neither says the
// commit is unknown, not that the tree was clean.
func TestFrom(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "b02118b5c0ffee"}, {Key: "vcs.modified", Value: "true"}}
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		ld   Info
		want string // as JSON
	}{
		{"ldflags", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261202-b02118b5c0ff+dirty"}, Settings: vcs}, Info{Version: "v1.2-3-gb02118b-dirty"},
			`{"version":"v1.2-3-gb02118b-dirty","commit":"b02118b5c0ffee","modified":true,"go":"go1.26.8"}`},
		{"ldflags commit over the enclosing checkout's", &debug.BuildInfo{GoVersion: "go1.26.8", Settings: vcs}, Info{Version: "84f2c6c", Commit: "84f2c6cb71e1", Modified: parseModified("false")},
			`{"version":"84f2c6c","commit":"84f2c6cb71e1","modified":false,"go":"go1.26.8"}`},
		{"ldflags commit, modified unreadable", &debug.BuildInfo{GoVersion: "go1.26.8"}, Info{Commit: "84f2c6cb71e1", Modified: parseModified("")},
			`{"version":"(devel)","commit":"84f2c6cb71e1","modified":null,"go":"go1.26.8"}`},
		{"module version", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261202-b02118b5c0ff"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "b02118b5c0ffee"}, {Key: "vcs.modified", Value: "false"}}}, Info{},
			`{"version":"v0.0.0-20261202-b02118b5c0ff","commit":"b02118b5c0ffee","modified":false,"go":"go1.26.8"}`},
		{"go test", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, Info{},
			`{"version":"(devel)","commit":"unknown","modified":null,"go":"go1.26.8"}`},
		{"modified without a revision", &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}}, Info{},
			`{"version":"(devel)","commit":"unknown","modified":null,"go":"go1.26.8"}`},
		{"no build info", nil, Info{}, `{"version":"(devel)","commit":"unknown","modified":null,"go":"unknown"}`},
	} {
		b, err := json.Marshal(From(c.bi, c.ld))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, b, c.want)
		}
	}
}

// TestCollector: one gauge of value 1 with exactly the three labels.
func TestCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(Info{Version: "v1", Commit: "abc", GoVersion: "go1.26.8"}.Collector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "probectl_build_info" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, want one probectl_build_info", mfs)
	}
	m := mfs[0].GetMetric()[0]
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	if len(got) != 3 || got["version"] != "v1" || got["commit"] != "abc" || got["goversion"] != "go1.26.8" || m.GetGauge().GetValue() != 1 {
		t.Errorf("probectl_build_info %v = %v, want {commit=abc,goversion=go1.26.8,version=v1} 1", got, m.GetGauge().GetValue())
	}
}
