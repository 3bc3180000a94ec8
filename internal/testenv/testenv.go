// Package testenv is what tests say when the machine lacks something
// they need: a skip on a developer's machine, a failure in CI.
//
// Imports nothing of probectl.
package testenv

import (
	"os"
	"testing"
)

// Absent skips the test because something it needs is not on this
// machine, saying what (format, args), unless CI=true is set: CI installs
// everything the tests need (.ci/run), so there the absence fails the test.
func Absent(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (.ci/run installs it)", args...)
	}
	t.Skipf(format, args...)
}
