package fleet

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/compiler"
	"github.com/probectl/probectl/fleet/api/v1alpha1"
	"github.com/probectl/probectl/spec"
)

// MaxBinariesJSON bounds the binaries one NodeFacts object carries, as
// JSON (the function lists gzipped, then base64): with a kernel's
// function list the object stays under etcd's 1.5 MiB. A binary whose
// list does not fit is published with its digest only, and a cluster
// plan says its functions were not checked.
const MaxBinariesJSON = 384 << 10

// MaxBinaries is how many binaries a NodeFacts object lists (the CRD's
// limit): those after the first MaxBinaries by name are not published.
const MaxBinaries = 256

// maxRefused bounds the functions a binary's record lists as refused
// (the CRD's limit); a binary with more is published without its list.
const maxRefused = 4096

// BinariesNamed lists the binaries the user probes of a spec set name
// (paths or library names), sorted, once each. Files that do not parse
// name none.
func BinariesNamed(files map[string][]byte) []string {
	cfg, diags := spec.Parse(files)
	if diags.HasErrors() {
		return nil
	}
	var names []string
	for _, p := range cfg.Probes {
		if p.Addr.Kind == bpf.KindUser && p.Binary != "" {
			names = append(names, p.Binary)
		}
	}
	return sortedSet(names)
}

func sortedSet(names []string) []string {
	sort.Strings(names)
	out := names[:0]
	for i, n := range names {
		if i == 0 || n != names[i-1] {
			out = append(out, n)
		}
	}
	return out
}

// DescribeBinaries reads the binaries names (at most MaxBinaries) under
// the facts' root as the compiler does (compiler.DescribeBinary) and
// turns them into NodeFacts records, within MaxBinariesJSON: the
// function lists gzipped, in name order while they fit.
func DescribeBinaries(f *bpf.Facts, names []string) []v1alpha1.NodeBinary {
	names = sortedSet(append([]string(nil), names...))
	if len(names) > MaxBinaries {
		names = names[:MaxBinaries]
	}
	left := MaxBinariesJSON
	var out []v1alpha1.NodeBinary
	for _, name := range names {
		b := compiler.DescribeBinary(f, name)
		nb := v1alpha1.NodeBinary{Name: b.Name, Path: b.Path, BuildID: b.BuildID, Digest: b.Digest, Error: b.Error}
		left -= jsonSize(nb)
		if b.Error == "" && len(b.Refused) <= maxRefused {
			full := nb
			full.Functions, full.Refused = gzipLines(b.Functions), b.Refused
			if more := jsonSize(full) - jsonSize(nb); more <= left {
				nb, left = full, left-more
			}
		}
		out = append(out, nb)
	}
	return out
}

func jsonSize(v any) int {
	b, _ := json.Marshal(v)
	return len(b)
}

func gzipLines(lines []string) []byte {
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	io.WriteString(w, strings.Join(lines, "\n"))
	w.Close()
	return b.Bytes()
}

// gunzipLines reads what gzipLines wrote, at most MaxFunctions bytes.
func gunzipLines(gz []byte) ([]string, error) {
	r, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxFunctions+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFunctions {
		return nil, fmt.Errorf("the list unpacks to more than %d bytes", MaxFunctions)
	}
	lines := strings.Split(string(b), "\n")
	sort.Strings(lines)
	return lines, nil
}

// binariesOf reads the binaries a node published, for the compiler: a
// non-nil map, so that a binary missing from it is not checked rather
// than read on this machine.
func binariesOf(nf *v1alpha1.NodeFacts) (bpf.Binaries, error) {
	out := bpf.Binaries{}
	for _, nb := range nf.Spec.Binaries {
		b := &bpf.Binary{Name: nb.Name, Path: nb.Path, BuildID: nb.BuildID, Digest: nb.Digest, Refused: nb.Refused, Error: nb.Error}
		if len(nb.Functions) > 0 {
			fns, err := gunzipLines(nb.Functions)
			if err != nil {
				return nil, fmt.Errorf("NodeFacts %s: binary %s: functions: %w", nf.Name, nb.Name, err)
			}
			b.Functions = fns
		}
		if err := printableBinary(nb); err != nil {
			return nil, fmt.Errorf("NodeFacts %s: binary %q: %w", nf.Name, nb.Name, err)
		}
		out[nb.Name] = b
	}
	return out, nil
}

// printableBinary refuses a published binary whose strings would not
// print as themselves: they reach the planner's diagnostics and terminal.
func printableBinary(nb v1alpha1.NodeBinary) error {
	texts := []string{nb.Name, nb.Path, nb.BuildID, nb.Digest, nb.Error}
	for fn, why := range nb.Refused {
		texts = append(texts, fn, why)
	}
	for _, s := range texts {
		if !spec.Printable(s) {
			return fmt.Errorf("%q does not print as itself (control characters or bytes that are not UTF-8)", s)
		}
	}
	return nil
}

// localBTF is this machine's BTF identity, read once.
var localBTF = sync.OnceValues(bpf.LiveBTFIdentity)

// BTFOf is what NodeFacts say of live facts' BTF: the running kernel's
// identity, or nil for other facts or when it cannot be read.
func BTFOf(f *bpf.Facts) *v1alpha1.NodeBTF {
	if f.Source != "live" || !f.BTF {
		return nil
	}
	id, err := localBTF()
	if err != nil {
		return nil
	}
	return &v1alpha1.NodeBTF{SHA256: id.SHA256, Size: id.Size, Release: f.Release}
}

// sameBTF reports whether a node's BTF is this machine's.
func sameBTF(b *v1alpha1.NodeBTF) bool {
	if b == nil {
		return false
	}
	id, err := localBTF()
	return err == nil && id.SHA256 == b.SHA256 && id.Size == b.Size
}
