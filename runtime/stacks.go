package runtime

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/compiler/compiled"
	"golang.org/x/sys/unix"
)

// Stack is a decoded kstack or ustack value: the frames the kernel
// recorded, innermost first, symbolized. A stack the kernel could not
// record (Err: a kernel stack sampled in user mode, a user stack of a
// kernel thread, a full stack map) has no frames.
type Stack struct {
	User bool  `json:"-"`
	ID   int64 `json:"-"`
	// Proc is the process of a user stack: its pid and start time.
	Proc   symbols.Process `json:"-"`
	Frames []symbols.Frame `json:"-"`
	Err    string          `json:"-"`

	ref string // the stack map
}

// MarshalJSON writes the frames: [{addr, symbol, offset, module}, ...].
// A stack without frames for a reason is one element saying why:
// [{"lost": kind, "reason": text}] (kind from Lost), so JSON keeps what
// the text and flame graph views show.
func (s *Stack) MarshalJSON() ([]byte, error) {
	if s.Err != "" {
		return bpf.JSON([]stackLoss{{Lost: s.Lost(), Reason: s.Err}})
	}
	if s.Frames == nil {
		return []byte("[]"), nil
	}
	return bpf.JSON(s.Frames)
}

// stackLoss is the JSON of a stack without frames.
type stackLoss struct {
	Lost   string `json:"lost"`
	Reason string `json:"reason"`
}

// Lost is the kind of reason a stack has no frames, "" when it has them:
// "full" (the stack map was full), "collision" (its bucket held another
// stack), "no stack" (none to record: a kernel stack of a sample in user
// mode, a user stack of a kernel thread, no stack stored), "missing"
// (the id is no longer in the map), "unreadable" (the map is gone), or
// "other".
func (s *Stack) Lost() string {
	switch {
	case s.Err == "":
		return ""
	case s.Err == stackErrFull:
		return "full"
	case s.Err == stackErrCollision:
		return "collision"
	case strings.HasPrefix(s.Err, "no "):
		return "no stack"
	case s.Err == stackErrMissing:
		return "missing"
	case strings.HasPrefix(s.Err, stackErrUnreadable):
		return "unreadable"
	}
	return "other"
}

// Why a stack has no frames, as its text says.
const (
	stackErrFull       = "stack lost: stack map full"
	stackErrCollision  = "stack lost: hash collision in the stack map"
	stackErrMissing    = "stack lost: not in the stack map"
	stackErrUnreadable = "stack map unreadable: "
)

// String is the stack on one line, innermost first: "f1; f2; f3".
func (s *Stack) String() string {
	if s.Err != "" {
		return "[" + s.Err + "]"
	}
	var b bytes.Buffer
	for i, f := range s.Frames {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.String())
	}
	return b.String()
}

// decodeStack decodes a key or record field holding a stack; its frames
// are read by a stackResolver.
func decodeStack(f compiled.KeyField, raw []byte) *Stack {
	s := &Stack{User: f.Kind == compiled.KeyUStack, ref: f.StackMap}
	s.ID = int64(binary.LittleEndian.Uint64(raw[:8]))
	if s.User && len(raw) >= 16 {
		s.Proc = symbols.ProcessOf(binary.LittleEndian.Uint64(raw[8:16]))
	}
	if s.ID < 0 {
		s.Err = stackErr(s.ID, s.User)
	}
	return s
}

// stackErr says why bpf_get_stackid returned errno -id.
func stackErr(id int64, user bool) string {
	switch unix.Errno(-id) {
	case unix.EFAULT:
		if user {
			return "no user stack"
		}
		return "no kernel stack"
	case unix.EEXIST:
		return stackErrCollision
	case unix.ENOMEM, unix.E2BIG:
		// bpf_get_stackid: no free entry; a stack map stored by
		// content: max_entries stored (E2BIG), or no memory for another.
		return stackErrFull
	case unix.ENOENT:
		return "no stack stored"
	}
	return fmt.Sprintf("stack lost: %v", unix.Errno(-id))
}

// SymbolOptions say where show finds the files of user stacks.
type SymbolOptions struct {
	// Dirs are searched for files by build id (besides the index, the
	// debug directory, running processes, $PATH and library directories).
	Dirs []string
}

// stackResolver reads stacks from a probe's stack maps and symbolizes them.
type stackResolver struct {
	open  mapSource
	maps  map[string]*ebpf.Map
	rels  []func()
	kern  *symbols.KernelSymbols
	kerr  error
	kdone bool
	user  *symbols.UserSymbols
	cache map[string][]symbols.Frame
}

// stackLongKey marks the key of a stack stored by content in the long
// map of its kind and depth.
const stackLongKey = 1 << 62

// stackLookups makes this process's readers of stack maps take turns.
var stackLookups sync.Mutex

// lookupStack reads stack id of m. The kernel's lookup of a stack map
// takes the stack out of its bucket while it copies it
// (bpf_stackmap_copy), so another reader of the same id meanwhile finds
// none: this process's readers take turns, and a reader that finds none
// tries again a few times, as another process may be reading it.
//
// A stack stored by content (a hash map, keyed by the hash of its
// frames) is read as it is: the map is not changed by reading it.
func lookupStack(m *ebpf.Map, id int64, raw *[]byte) error {
	if m.Type() == ebpf.Hash {
		return m.Lookup(uint64(id), raw)
	}
	stackLookups.Lock()
	defer stackLookups.Unlock()
	for try := 0; ; try++ {
		err := m.Lookup(uint32(id), raw)
		if err == nil || !errors.Is(err, ebpf.ErrKeyNotExist) || try == 4 {
			return err
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func newStackResolver(open mapSource, user *symbols.UserSymbols) *stackResolver {
	return &stackResolver{open: open, maps: map[string]*ebpf.Map{}, user: user, cache: map[string][]symbols.Frame{}}
}

func (r *stackResolver) close() {
	for _, rel := range r.rels {
		rel()
	}
	r.rels, r.maps = nil, map[string]*ebpf.Map{}
}

// resolveKey reads and symbolizes the stacks of a decoded key.
func (r *stackResolver) resolveKey(k OrderedKey) error {
	for _, f := range k {
		if s, ok := f.Value.(*Stack); ok {
			if err := r.resolve(s); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *stackResolver) resolve(s *Stack) error {
	if s.Err != "" || s.Frames != nil {
		return nil
	}
	ck := fmt.Sprintf("%s/%d/%d/%d", s.ref, s.ID, s.Proc.PID, s.Proc.Start)
	if fr, ok := r.cache[ck]; ok {
		s.Frames = fr
		return nil
	}
	ref := s.ref
	if s.ID&stackLongKey != 0 {
		ref += "_long" // a deep stack stored by content (the compiler's stackLongRef)
	}
	m := r.maps[ref]
	if m == nil {
		mm, rel, err := r.open(ref)
		if err != nil {
			return err
		}
		m = mm
		r.maps[ref] = m
		r.rels = append(r.rels, rel)
	}
	var raw []byte
	if err := lookupStack(m, s.ID, &raw); err != nil {
		s.Err = stackErrMissing
		return nil
	}
	if s.User {
		s.Frames = r.userFrames(raw, s.Proc)
	} else {
		s.Frames = r.kernelFrames(raw)
	}
	if s.Frames == nil {
		s.Frames = []symbols.Frame{}
	}
	r.cache[ck] = s.Frames
	return nil
}

func (r *stackResolver) kernelFrames(raw []byte) []symbols.Frame {
	if !r.kdone {
		r.kdone = true
		r.kern, r.kerr = symbols.LoadKernelSymbols()
	}
	var out []symbols.Frame
	for off := 0; off+8 <= len(raw); off += 8 {
		addr := binary.LittleEndian.Uint64(raw[off:])
		if addr == 0 {
			break
		}
		out = append(out, r.kern.Frame(addr))
	}
	return out
}

// Build-id frame status (struct bpf_stack_build_id).
const (
	buildIDEmpty = 0
	buildIDValid = 1
	buildIDIP    = 2
)

func (r *stackResolver) userFrames(raw []byte, p symbols.Process) []symbols.Frame {
	var out []symbols.Frame
	size := compiled.StackFrameSize(true)
	for off := 0; off+size <= len(raw); off += size {
		e := raw[off : off+size]
		status := int32(binary.LittleEndian.Uint32(e))
		val := binary.LittleEndian.Uint64(e[24:])
		switch status {
		case buildIDValid:
			out = append(out, r.user.FrameByBuildID(p, hex.EncodeToString(e[4:24]), val))
		case buildIDIP:
			if val == 0 {
				return out
			}
			out = append(out, r.user.FrameAt(p, val))
		default:
			return out
		}
	}
	return out
}

// symbols returns a user symbolizer for show. Its build-id index is a
// cache of the user's ($XDG_CACHE_HOME/probectl/buildids.json), not
// state: show changes nothing in the workspace.
func (w *Workspace) symbols() *symbols.UserSymbols {
	return symbols.NewUserSymbols(buildIDIndexFile(), w.Symbols.Dirs)
}

// buildIDIndexFile is the path of the build-id index, or "" (none).
func buildIDIndexFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	dir = filepath.Join(dir, "probectl")
	if os.MkdirAll(dir, 0o700) != nil {
		return ""
	}
	// Under sudo -E, $HOME and $XDG_CACHE_HOME are the invoking user's:
	// an index there is theirs to write (and its directory a symlink to
	// anywhere). Only a directory of this user's own, that no other may
	// write, holds it; and no other user may rename it or a directory
	// above it away (as sshd's StrictModes: each one above is root's or
	// this user's, not writable by others, or sticky).
	euid := uint32(os.Geteuid())
	for p, first := filepath.Clean(dir), true; ; p, first = filepath.Dir(p), false {
		if !trustedCacheDir(p, first, euid) {
			return ""
		}
		if p == "/" || p == "." {
			break
		}
	}
	return filepath.Join(dir, "buildids.json")
}

// trustedCacheDir reports whether p is a directory (not a symlink) that
// no user but euid and root may change: euid's own and writable by no
// other when own, else root's or euid's, and writable by others only when
// sticky.
func trustedCacheDir(p string, own bool, euid uint32) bool {
	st, err := os.Lstat(p)
	if err != nil || !st.IsDir() {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	switch {
	case own && (sys.Uid != euid || st.Mode().Perm()&0o022 != 0):
		return false
	case sys.Uid != euid && sys.Uid != 0:
		return false
	case st.Mode().Perm()&0o022 != 0 && st.Mode()&os.ModeSticky == 0:
		return false
	}
	return true
}

// resolveStacks reads and symbolizes the stacks in an aggregation's keys,
// and counts those without frames by kind of loss (StacksLost).
func resolveStacks(ar *AggregationResult, open mapSource, syms *symbols.UserSymbols) error {
	r := newStackResolver(open, syms)
	defer r.close()
	for _, e := range ar.Entries {
		if err := r.resolveKey(e.Key); err != nil {
			return err
		}
		ar.countLost(e)
	}
	return nil
}

// countLost adds entry e's lost stacks to StacksLost: its count for a
// count aggregation (the samples whose stack was lost), else 1 (the key).
func (ar *AggregationResult) countLost(e Entry) {
	n := int64(1)
	if ar.Kind == compiled.AggCount && e.Value != nil {
		n = *e.Value
	}
	for _, f := range e.Key {
		s, ok := f.Value.(*Stack)
		if !ok || s.Err == "" {
			continue
		}
		if ar.StacksLost == nil {
			ar.StacksLost = map[string]int64{}
		}
		ar.StacksLost[s.Lost()] += n
	}
}

// eventStacks reads the stacks of event records: each probe's from its
// own stack maps, which open gives (nil: none resolved). The maps stay
// open as long as the stream (Close may run while another goroutine
// decodes, so it does not close them).
type eventStacks struct {
	open      func(p *ProbeState) mapSource
	syms      *symbols.UserSymbols
	resolvers map[*ProbeState]*stackResolver
}

// resolve reads and symbolizes the stacks of a record of probe p. A stack
// whose map cannot be read (its probe replaced since) says so.
func (e *eventStacks) resolve(p *ProbeState, fields OrderedKey) {
	if !hasStack(fields) || e.open == nil {
		return
	}
	r := e.resolver(p)
	for _, f := range fields {
		if s, ok := f.Value.(*Stack); ok {
			if err := r.resolve(s); err != nil {
				s.Err = stackErrUnreadable + err.Error()
			}
		}
	}
}

// hasStack says a field of fields is a stack.
func hasStack(fields OrderedKey) bool {
	for _, f := range fields {
		if _, ok := f.Value.(*Stack); ok {
			return true
		}
	}
	return false
}

// resolver is probe p's stack resolver, made at its first stack.
func (e *eventStacks) resolver(p *ProbeState) *stackResolver {
	if e.resolvers == nil {
		e.resolvers, e.syms = map[*ProbeState]*stackResolver{}, symbols.NewUserSymbols("", nil)
	}
	r := e.resolvers[p]
	if r == nil {
		r = newStackResolver(e.open(p), e.syms)
		e.resolvers[p] = r
	}
	return r
}

// stackMaps opens the maps of a session's probe.
func (s *Session) stackMaps(p *ProbeState) mapSource {
	for i, q := range s.States {
		if q == p {
			return s.maps(i)
		}
	}
	return func(ref string) (*ebpf.Map, func(), error) {
		return nil, nil, fmt.Errorf("%s: not a probe of this run", p.Address)
	}
}
