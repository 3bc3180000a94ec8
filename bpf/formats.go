package bpf

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// A kernel's tracepoint formats, all of them, as one text: the capture.
// Built-in profiles embed their kernel's (tracepoints/PROFILE.tp.gz,
// captured from Debian's kernel booted in QEMU: make tracepoints), and
// facts files written by probectl target -o carry the live kernel's. The
// text is unpacked when the target is first asked for a tracepoint, and
// each event's format is parsed when it is first asked for.
//
// A capture lists the events sorted by name, separated by empty lines:
// the event's name, then the field lines of its format file as tracefs
// writes them, without the common_* fields (which every event shares, and
// which probes do not read). Lines starting with "#" are comments: where
// the capture came from.
//
//	# Linux 6.12.117+deb13-arm64 #1 SMP Debian 6.12.117-1 (2026-11-20) aarch64
//	sched:sched_switch
//	field:char prev_comm[16];	offset:8;	size:16;	signed:0;
//	...
//
//	sched:sched_wakeup
//	...

// MaxTracepointFormats bounds a capture, unpacked (a kernel's takes 300 to
// 700 KB).
const MaxTracepointFormats = 64 << 20

// ErrNoTracepoint says the target's kernel has no such tracepoint.
var ErrNoTracepoint = errors.New("no such tracepoint")

// ErrFormatUnknown says the target does not know a tracepoint's format: a
// facts file written without formats.
var ErrFormatUnknown = errors.New("the tracepoint's format is not known for the target")

// ErrEventsUnknown says the target does not list its tracepoints.
var ErrEventsUnknown = errors.New("the target does not list its tracepoints")

// CaptureTracepoints returns the capture of the tracefs mounted at dir:
// every events/GROUP/EVENT/format, but those of dynamic events (kprobes,
// uprobes, synthetic events: what dynamic_events lists, which a machine
// adds and removes) and of the ftrace group (the function tracer's own
// records, not tracepoints). A format that cannot be read is an error; its
// fields are copied as they are, parsed only when used.
func CaptureTracepoints(dir string) ([]byte, error) {
	names, err := filepath.Glob(filepath.Join(dir, "events", "*", "*", "format"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no tracepoint formats under %s/events", dir)
	}
	dynamic := dynamicEvents(dir)
	type event struct{ name, file string }
	var events []event
	for _, file := range names {
		rel, _ := filepath.Rel(filepath.Join(dir, "events"), filepath.Dir(file))
		name := strings.Replace(rel, string(filepath.Separator), ":", 1)
		if CheckEvent(name) != nil || dynamic[name] {
			continue
		}
		events = append(events, event{name, file})
	}
	slices.SortFunc(events, func(a, b event) int { return strings.Compare(a.name, b.name) })
	var out bytes.Buffer
	for i, ev := range events {
		b, err := os.ReadFile(ev.file)
		if err != nil {
			return nil, fmt.Errorf("tracepoint %s: %w", ev.name, err)
		}
		if i > 0 {
			out.WriteByte('\n')
		}
		out.WriteString(ev.name + "\n")
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "field:") && !isCommonField(line) {
				out.WriteString(line + "\n")
			}
		}
	}
	return out.Bytes(), nil
}

// isCommonField reports whether a field line declares a common_* field.
func isCommonField(line string) bool {
	decl, _, _ := strings.Cut(strings.TrimPrefix(line, "field:"), ";")
	name, _, err := parseDecl(decl)
	return err == nil && strings.HasPrefix(name, "common_")
}

// dynamicEvents lists the events that tracefs's dynamic_events (and, on
// kernels before it, kprobe_events and uprobe_events) define, as
// "group:event": lines such as "p:kprobes/my_open do_sys_open".
func dynamicEvents(dir string) map[string]bool {
	out := map[string]bool{}
	for _, file := range []string{"dynamic_events", "kprobe_events", "uprobe_events"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			head, _, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
			if _, def, ok := strings.Cut(head, ":"); ok {
				if group, name, ok := strings.Cut(def, "/"); ok {
					out[group+":"+name] = true
				}
			}
		}
	}
	return out
}

// Gzip compresses data the one way probectl does: best compression, no
// name or time in the header, so that the same data gives the same bytes.
func Gzip(data []byte) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write(data)
	_ = zw.Close()
	return b.Bytes()
}

// gunzip unpacks at most limit bytes. Whatever the input, it returns an
// error, never panics.
func gunzip(gz []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	// The trailer says how large the data is (modulo 2^32): one allocation.
	var b bytes.Buffer
	if n := len(gz); n >= 4 {
		b.Grow(int(min(int64(binary.LittleEndian.Uint32(gz[n-4:])), limit) + 1))
	}
	_, err = b.ReadFrom(io.LimitReader(zr, limit+1))
	raw := b.Bytes()
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	if int64(len(raw)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return raw, nil
}

// splitCapture indexes a capture: each event's field lines by its name,
// and the names, sorted. A name that is not an event's, or that comes
// twice, is an error.
func splitCapture(text []byte) (map[string]string, []string, error) {
	blocks := map[string]string{}
	var names []string
	rest := string(text)
	for rest != "" {
		var block string
		block, rest, _ = strings.Cut(rest, "\n\n")
		for strings.HasPrefix(block, "#") || strings.HasPrefix(block, "\n") {
			_, block, _ = strings.Cut(block, "\n")
		}
		if block == "" {
			continue
		}
		name, fields, _ := strings.Cut(block, "\n")
		if err := CheckEvent(name); err != nil {
			return nil, nil, fmt.Errorf("event %q: %w", name, err)
		}
		if _, dup := blocks[name]; dup {
			return nil, nil, fmt.Errorf("event %s comes twice", name)
		}
		blocks[name] = strings.TrimSuffix(fields, "\n")
		names = append(names, name)
	}
	slices.Sort(names)
	return blocks, names, nil
}

// DiffTracepoints lists how two captures differ, event by event, comments
// aside: an event that only one has, or whose fields differ. It lists at
// most most differences, then how many more there are.
func DiffTracepoints(a, b []byte, aName, bName string, most int) ([]string, error) {
	ablocks, anames, err := splitCapture(a)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", aName, err)
	}
	bblocks, bnames, err := splitCapture(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", bName, err)
	}
	var diffs []string
	for _, n := range anames {
		switch fb, ok := bblocks[n]; {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: only in %s", n, aName))
		case fb != ablocks[n]:
			diffs = append(diffs, fmt.Sprintf("%s: %s has\n\t%s\n    and %s has\n\t%s", n, aName,
				strings.ReplaceAll(ablocks[n], "\n", "\n\t"), bName, strings.ReplaceAll(fb, "\n", "\n\t")))
		}
	}
	for _, n := range bnames {
		if _, ok := ablocks[n]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: only in %s", n, bName))
		}
	}
	if len(diffs) > most {
		diffs = append(diffs[:most], fmt.Sprintf("... and %d more", len(diffs)-most))
	}
	return diffs, nil
}

// formatSet is a capture, unpacked and indexed when first used; each
// event's format is parsed when first asked for. Copies of facts share it.
type formatSet struct {
	what string                 // what the capture is, for errors
	load func() ([]byte, error) // the gzipped capture

	once   sync.Once
	err    error
	blocks map[string]string
	names  []string

	mu     sync.Mutex
	parsed map[string]*TracepointFormat
	errs   map[string]error
}

func newFormatSet(what string, load func() ([]byte, error)) *formatSet {
	return &formatSet{what: what, load: load}
}

func (s *formatSet) index() error {
	s.once.Do(func() {
		gz, err := s.load()
		if err != nil {
			s.err = fmt.Errorf("%s: %w", s.what, err)
			return
		}
		text, err := gunzip(gz, MaxTracepointFormats)
		if err != nil {
			s.err = fmt.Errorf("%s: %w", s.what, err)
			return
		}
		s.blocks, s.names, err = splitCapture(text)
		if err != nil {
			s.err = fmt.Errorf("%s: %w", s.what, err)
		}
	})
	return s.err
}

// events lists the capture's events, sorted.
func (s *formatSet) events() ([]string, error) {
	if err := s.index(); err != nil {
		return nil, err
	}
	return s.names, nil
}

// format returns an event's format, [ErrNoTracepoint] when the capture
// does not have it, or why its format cannot be read.
func (s *formatSet) format(event string) (*TracepointFormat, error) {
	if err := s.index(); err != nil {
		return nil, err
	}
	block, ok := s.blocks[event]
	if !ok {
		return nil, ErrNoTracepoint
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if tp := s.parsed[event]; tp != nil {
		return tp, nil
	}
	if err := s.errs[event]; err != nil {
		return nil, err
	}
	tp, err := ParseTracepointFormat(event, block)
	if err != nil {
		if s.errs == nil {
			s.errs = map[string]error{}
		}
		s.errs[event] = fmt.Errorf("%s: %w", s.what, err)
		return nil, s.errs[event]
	}
	if s.parsed == nil {
		s.parsed = map[string]*TracepointFormat{}
	}
	s.parsed[event] = tp
	return tp, nil
}

// profileTracepoints holds the captures of the profiles' kernels, made by
// booting each (make tracepoints, or go generate for all five).
//
//go:generate go run ../cmd/vmexec -tracepoints tracepoints
//go:embed tracepoints/*.tp.gz
var profileTracepoints embed.FS

// profileFormatFile is where a profile's capture is embedded.
func profileFormatFile(name string) string { return "tracepoints/" + name + ".tp.gz" }

// profileSets holds one formatSet per profile, shared by every Facts the
// profile gives: a process unpacks a profile's capture at most once.
var profileSets = func() map[string]*formatSet {
	sets := map[string]*formatSet{}
	for name := range profiles {
		sets[name] = newFormatSet("the tracepoint formats of "+name, func() ([]byte, error) {
			return profileTracepoints.ReadFile(profileFormatFile(name))
		})
	}
	return sets
}()

// ProfileTracepoints returns the capture of a profile's kernel, unpacked:
// what the VM matrix compares with that kernel's tracefs.
func ProfileTracepoints(name string) ([]byte, error) {
	if _, ok := profiles[name]; !ok {
		return nil, fmt.Errorf("no profile %q (known: %v)", name, ProfileNames())
	}
	gz, err := profileTracepoints.ReadFile(profileFormatFile(name))
	if err != nil {
		return nil, err
	}
	return gunzip(gz, MaxTracepointFormats)
}
