package buildinfo

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version, commit and modified are what make build and make static give
// the binary from git (-ldflags "-X .../internal/buildinfo.version=...":
// git describe --always --dirty, git rev-parse HEAD, and "true" or "false"
// from git status). Without them the main module's version and go build's
// VCS stamp stand; go build stamps nothing in a git worktree (its .git is
// a file, golang/go#58218), and a worktree inside another checkout gets
// that checkout's commit, so make's are believed first.
var version, commit, modified string

// Unknown is the commit of a build without VCS information (go test, a
// build outside the repository or with -buildvcs=false).
const Unknown = "unknown"

// Info is one build of probectl.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"` // vcs.revision, or Unknown
	// Modified says whether the tree had changes not committed; null
	// when the build has no VCS information.
	Modified  *bool  `json:"modified"`
	GoVersion string `json:"go"`
}

// Read returns the running binary's build.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return From(bi, Info{Version: version, Commit: commit, Modified: parseModified(modified)})
}

// parseModified is the -X modified: "true", "false", or unknown (nil).
func parseModified(s string) *bool {
	if s != "true" && s != "false" {
		return nil
	}
	m := s == "true"
	return &m
}

// From returns the build bi describes (nil: nothing known), with what ld
// sets (the -X version, commit and modified, where not empty) before it.
func From(bi *debug.BuildInfo, ld Info) Info {
	in := Info{Version: ld.Version, Commit: Unknown, GoVersion: Unknown}
	if bi == nil {
		if in.Version == "" {
			in.Version = "(devel)"
		}
		return in
	}
	if in.Version == "" {
		in.Version = bi.Main.Version
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	if bi.GoVersion != "" {
		in.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				in.Commit = s.Value
			}
		case "vcs.modified":
			m := s.Value == "true"
			in.Modified = &m
		}
	}
	if ld.Commit != "" {
		in.Commit, in.Modified = ld.Commit, ld.Modified
	}
	if in.Commit == Unknown {
		in.Modified = nil
	}
	return in
}

// Collector is probectl_build_info{version,commit,goversion} 1, the
// Prometheus convention for saying which build a process runs.
func (in Info) Collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "probectl_build_info",
		Help: "The build of probectl serving: version, commit and Go version as labels; always 1.",
		ConstLabels: prometheus.Labels{
			"version":   in.Version,
			"commit":    in.Commit,
			"goversion": in.GoVersion,
		},
	})
	g.Set(1)
	return g
}
