package flamegraph

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/probectl/probectl/internal/flamegraph/flamegraphtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.svg")

// TestFlameGraphGolden holds the SVG byte for byte: a known profile, the
// hostile names of the browser test, and no samples in testdata/*.svg
// (-update rewrites them); the 20,000-frame graphs (capped ties, and a
// profile of 100,000 stacks) by their SHA-256, 4 MiB each. The files and
// sums are what the renderer wrote in package main before its script and
// style became embedded files.
func TestFlameGraphGolden(t *testing.T) {
	hostile := []Stack{{[]string{"proc"}, 1}}
	for i, name := range hostileNames {
		hostile = append(hostile, Stack{[]string{"proc", name}, int64(10 + i)})
	}
	for _, c := range []struct {
		name, title string
		stacks      []Stack
	}{
		{"known", "probectl flame graph: browser test", testStacks},
		{"hostile", `<script>window.flmInjected = "title"</script>`, hostile},
		{"empty", "nothing", nil},
	} {
		var b bytes.Buffer
		if err := Write(&b, c.title, c.stacks); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", c.name+".svg")
		if *update {
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b.Bytes(), want) {
			t.Errorf("%s: the SVG differs from %s (%d bytes, want %d; -update rewrites it)", c.name, path, b.Len(), len(want))
		}
	}
	var ties []Stack
	for i := range 5000 {
		var frames []string
		for d := range 10 {
			frames = append(frames, fmt.Sprintf("s%d_f%d", i, d))
		}
		ties = append(ties, Stack{frames, 1})
	}
	for _, c := range []struct {
		name   string
		stacks []Stack
		sum    string
	}{
		{"ties", ties, "3998f7cad578a6c75df1dee6af060d8eac2bcb6cc902b2cfea89024fb77c159c"},
		{"huge", hugeStacks(100000), "e861687c59877f229bcc2a498e611cbaed934ed5c9c74447f7db798b50ce1112"},
	} {
		var b bytes.Buffer
		if err := Write(&b, c.name, c.stacks); err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b.Bytes()); hex.EncodeToString(sum[:]) != c.sum {
			t.Errorf("%s: the SVG's SHA-256 is %x (%d bytes), want %s", c.name, sum, b.Len(), c.sum)
		}
	}
}

// TestFlameGraphEmbedded: the embedded script and style stay inside their
// CDATA sections, and the script names the attributes' namespace that
// the renderer writes.
func TestFlameGraphEmbedded(t *testing.T) {
	for name, s := range map[string]string{"flamegraph.js": flameScript, "flamegraph.css": flameStyle} {
		if strings.Contains(s, "]]>") {
			t.Errorf("%s holds ]]>: it would end its CDATA section", name)
		}
		if !strings.HasSuffix(s, "\n") {
			t.Errorf("%s does not end with a newline", name)
		}
	}
	if want := `var NS = "` + flameNS + `";`; !strings.Contains(flameScript, "\n"+want+"\n") {
		t.Errorf("flamegraph.js does not say %s", want)
	}
	if flameNS != flamegraphtest.Namespace {
		t.Errorf("flamegraphtest reads the namespace %q, the renderer writes %q", flamegraphtest.Namespace, flameNS)
	}
}
