// Package flamegraphtest reads the SVG flame graphs that internal/flamegraph
// writes back into frames, strictly (encoding/xml; anything the renderer
// does not write is an error), for the tests of the renderer and of
// probectl show -flamegraph. It imports nothing of probectl.
package flamegraphtest
