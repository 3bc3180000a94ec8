// Command probectl is the declarative probe compiler's command line: the
// only package that sees the whole pipeline (spec → compiler → runtime).
//
// It is three thin layers: arguments (cobra), commands (what to run), and
// views (human text and JSON). The engines the commands run, the one
// apply path and the two agents, are internal/engine's; the diagnostics'
// rendering is internal/termtext's. See README.md for the commands.
package main
