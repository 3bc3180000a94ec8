// Package buildinfo says which build of probectl is running: its version,
// the commit it was built from (and whether the tree was modified), and
// the Go that built it, for probectl version and the probectl_build_info
// metric of serve and the agents.
//
// Imports nothing of probectl; of the outside only client_golang.
package buildinfo
