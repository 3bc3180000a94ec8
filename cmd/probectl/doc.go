// Command probectl is the declarative probe compiler's command line: the
// only package that sees the whole pipeline (spec → compiler → runtime).
//
// It is three thin layers: arguments (cobra), commands (what to run), and
// views (human text and JSON). Each file is a command (workspace.go and
// eventsout.go the options several share): it parses and checks its
// options, calls an engine and hands the result to a view. The engines,
// the one apply path and the two agents, are internal/engine's; the views
// are internal/views' (one interface per command with -json, a human and
// a JSON implementation); the diagnostics' rendering is internal/termtext's.
// See README.md for the commands.
package main
