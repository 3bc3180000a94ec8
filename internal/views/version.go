package views

import (
	"fmt"
	"io"

	"github.com/probectl/probectl/internal/buildinfo"
)

// Version is the view of probectl version.
type Version interface {
	Version(in buildinfo.Info) error
}

// NewVersion is the version view -json selects, writing to w.
func NewVersion(asJSON bool, w io.Writer) Version {
	if asJSON {
		return VersionJSON{w}
	}
	return VersionHuman{w}
}

// VersionHuman is the build as text.
type VersionHuman struct{ W io.Writer }

// VersionJSON is the build as indented JSON.
type VersionJSON struct{ W io.Writer }

// Version writes in as JSON.
func (v VersionJSON) Version(in buildinfo.Info) error { return writeJSON(v.W, in) }

// Version writes in as text: version, commit, Go.
func (v VersionHuman) Version(in buildinfo.Info) error {
	commit := in.Commit
	switch {
	case in.Modified == nil:
		commit += " (no VCS information in this build)"
	case *in.Modified:
		commit += " (modified)"
	}
	_, err := fmt.Fprintf(v.W, "probectl %s\ncommit %s\n%s\n", in.Version, commit, in.GoVersion)
	return err
}
