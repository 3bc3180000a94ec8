// Command probectl is the declarative probe compiler's command line: the
// only package that sees the whole pipeline (spec → compiler → runtime).
//
// It is three thin layers: arguments (cobra), commands (what to run), and
// views (human text and JSON). See README.md for the commands.
package main
