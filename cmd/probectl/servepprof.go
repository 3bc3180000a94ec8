package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/internal/flamegraph"
	"github.com/probectl/probectl/runtime"
)

// pprofPath is where serve answers with a probe's profile:
// /debug/pprof/probectl/ADDRESS[?aggregation=NAME].
const pprofPath = "/debug/pprof/probectl/"

// pprofHandler serves the profile of an applied probe's aggregation keyed
// by stacks, as show -pprof writes it: cumulative since the probe was
// applied (its maps are never reset), its duration the time since. A
// scraper that wants deltas (Parca, Pyroscope) takes them between
// scrapes, as it does for Go's /debug/pprof/allocs.
func pprofHandler(stateDir, workspace string) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(rw, "only GET", http.StatusMethodNotAllowed)
			return
		}
		addr := strings.TrimPrefix(r.URL.Path, pprofPath)
		b, code, err := probeProfile(stateDir, workspace, addr, r.URL.Query().Get("aggregation"))
		if err != nil {
			http.Error(rw, err.Error(), code)
			return
		}
		rw.Header().Set("Content-Type", "application/octet-stream")
		rw.Header().Set("Content-Disposition", `attachment; filename="profile.pb.gz"`)
		rw.Write(b)
	})
}

// probeProfile reads the probe at addr and returns its profile, or the
// HTTP status and the error.
func probeProfile(stateDir, workspace, addr, aggName string) ([]byte, int, error) {
	a, err := bpf.ParseAddress(addr)
	if err != nil {
		return nil, http.StatusNotFound, fmt.Errorf("%v: ask for %sKIND.NAME", err, pprofPath)
	}
	w, err := runtime.Open(stateDir, workspace)
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	defer w.Close()
	s, err := w.Inspect()
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	p := s.Probe(a)
	if p == nil {
		return nil, http.StatusNotFound, fmt.Errorf("%s is not applied in workspace %q", a, workspace)
	}
	results := w.Read([]*runtime.ProbeState{p})
	if results[0].Error != "" {
		return nil, http.StatusInternalServerError, fmt.Errorf("%s cannot be read: %s", a, results[0].Error)
	}
	ar, _, err := stackAggregation(results, aggName)
	if err != nil {
		return nil, http.StatusNotFound, err
	}
	var b bytes.Buffer
	o := flamegraph.ProfileOptions{Sampler: p.Sampler, Time: time.Now()}
	if !p.AppliedAt.IsZero() {
		o.Duration = time.Since(p.AppliedAt)
	}
	if err := flamegraph.WriteProfile(&b, ar, o); err != nil {
		return nil, http.StatusInternalServerError, err
	}
	return b.Bytes(), http.StatusOK, nil
}
