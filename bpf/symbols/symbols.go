package symbols

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/probectl/probectl/bpf"
)

// Symbolization: stack frames to function names. Kernel addresses through
// /proc/kallsyms (modules included); user addresses through the ELF symbol
// tables of the files a process maps, found by /proc/PID/maps while it
// runs, or by build id and file offset (what the kernel records for user
// stacks) after it has exited.

// Frame is one symbolized stack frame. Addr is the address, or for a user
// frame the kernel recorded by build id, the offset in the file. Symbol is
// empty when unknown;
// Module is the kernel module ("" for the kernel image) or the path of the
// user file. Note, when set, says why the frame is not to be believed as
// named, and stands for its module wherever it is shown: "process 1234
// exited" (an address of a process whose pid is now another's, or no
// one's), "untrusted: /tmp/x owned by uid 1000" (the only file found with
// the frame's build id is one nobody vouches for: its symbols are only
// what the file claims).
// Reason says why Symbol is empty when the file's symbols were not read (a
// bound on reading them, see elfsyms.go), else "".
//
// BuildID is the GNU build id (hex) of the file the frame is in, when
// known; MapStart, MapLimit and MapOffset are the process's mapping of
// that file the address fell in (start, end and file offset; all 0 when
// Addr is a file offset, as a build-id frame's is): what a profile
// (pprof's Mapping) needs for another tool to symbolize Addr again.
type Frame struct {
	Addr   uint64
	Symbol string
	Offset uint64
	Module string
	Note   string
	Reason string

	BuildID                       string
	MapStart, MapLimit, MapOffset uint64
}

// MarshalJSON writes the frame with its address in hex ("0xffffffff81234567"):
// a JSON number loses a 64-bit address's low bits in most readers.
func (f Frame) MarshalJSON() ([]byte, error) {
	type frame struct {
		Addr   string `json:"addr"`
		Symbol string `json:"symbol"`
		Offset uint64 `json:"offset"`
		Module string `json:"module"`
		Note   string `json:"note,omitempty"`
		Reason string `json:"reason,omitempty"`
	}
	return bpf.JSON(frame{fmt.Sprintf("0x%x", f.Addr), f.Symbol, f.Offset, f.Module, f.Note, f.Reason})
}

// String is the frame as show prints it: func+0x12 [module], or the
// address when the symbol is unknown (and why, when a bound said so); the
// note in the module's place (func+0x12 [untrusted: /tmp/x owned by uid
// 1000], 0x7f12 [process 1234 exited]).
func (f Frame) String() string {
	s := f.Name()
	if f.Symbol != "" && f.Offset != 0 {
		s += fmt.Sprintf("+0x%x", f.Offset)
	}
	switch {
	case f.Note != "":
		s += " [" + f.Note + "]"
	case f.Module != "":
		s += " [" + filepath.Base(f.Module) + "]"
	}
	if f.Symbol == "" && f.Reason != "" {
		s += " (" + f.Reason + ")"
	}
	return s
}

// Name is the frame as a flame graph names it: the function, or the address
// when the symbol is unknown.
func (f Frame) Name() string {
	if f.Symbol != "" {
		return f.Symbol
	}
	return fmt.Sprintf("0x%x", f.Addr)
}

// sym is one function symbol: [Addr, Addr+Size), or up to the next symbol
// when Size is 0.
type sym struct {
	addr, size uint64
	name       string
	module     string
}

// symtab is a sorted symbol table.
type symtab []sym

func (t symtab) lookup(addr uint64) (sym, bool) {
	i := sort.Search(len(t), func(i int) bool { return t[i].addr > addr }) - 1
	if i < 0 {
		return sym{}, false
	}
	s := t[i]
	if s.size != 0 && addr >= s.addr+s.size {
		return sym{}, false
	}
	return s, true
}

func (t symtab) sort() {
	sort.SliceStable(t, func(i, j int) bool { return t[i].addr < t[j].addr })
}

// KernelSymbols resolves kernel addresses by /proc/kallsyms.
type KernelSymbols struct {
	syms symtab
}

// LoadKernelSymbols reads /proc/kallsyms. Without privilege (or with
// kptr_restrict) the kernel hides the addresses: every frame is then
// unknown.
func LoadKernelSymbols() (*KernelSymbols, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseKallsyms(f)
}

// parseKallsyms parses kallsyms text: "ffffffff81000000 T _text" and
// "ffffffffc0201000 t name\t[module]". Only text symbols are kept.
func parseKallsyms(r io.Reader) (*KernelSymbols, error) {
	k := &KernelSymbols{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) < 3 {
			continue
		}
		switch fields[1] {
		case "t", "T", "w", "W":
		default:
			continue
		}
		addr, err := strconv.ParseUint(fields[0], 16, 64)
		if err != nil || addr == 0 {
			continue
		}
		s := sym{addr: addr, name: fields[2]}
		if len(fields) > 3 {
			s.module = strings.Trim(fields[3], "[]")
		}
		k.syms = append(k.syms, s)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	k.syms.sort()
	return k, nil
}

// Frame symbolizes a kernel address.
func (k *KernelSymbols) Frame(addr uint64) Frame {
	f := Frame{Addr: addr}
	if k == nil {
		return f
	}
	if s, ok := k.syms.lookup(addr); ok {
		f.Symbol, f.Offset, f.Module = s.name, addr-s.addr, s.module
	}
	return f
}

// elfFile is what symbolizes addresses in one ELF file: its function
// symbols (by virtual address) and its loadable segments (to turn a file
// offset into an address).
type elfFile struct {
	path    string
	buildID string
	syms    symtab
	// note says why syms misses some or all of the file's symbols.
	note  string
	loads []elf.ProgHeader
	// owner and perm, of the file opened: whose its contents are.
	owner uint32
	perm  os.FileMode
	// debugOnly: a separate debug file (/usr/lib/debug), whose segments
	// have no contents: file offsets are taken as the first segment's
	// (offset 0 at its page-aligned address), as linkers lay code out.
	debugOnly bool
}

// distrust says why the file's contents are not to be believed as the
// code of a process of uid (-1: none known, the process has exited), or ""
// when they are: a build id, like the symbols, is only what a file says,
// and another user's file may claim any. A file is believed when root,
// this user or the process's own user owns it and no other may write it.
func (e *elfFile) distrust(uid int) string {
	switch {
	case e.perm&0o022 != 0:
		return fmt.Sprintf("untrusted: %s writable by others (mode %04o)", e.path, e.perm)
	case e.owner == 0 || e.owner == ownID || uid >= 0 && e.owner == uint32(uid):
		return ""
	}
	return fmt.Sprintf("untrusted: %s owned by uid %d", e.path, e.owner)
}

// debugPath is where Debian's -dbgsym packages keep the symbols of the
// file with build id id.
func debugPath(id string) string {
	if len(id) < 3 {
		return ""
	}
	return filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug")
}

// openELFFile opens the ELF file at path and parses its headers (see
// [newELFFile]), the bytes read (then and for its notes) taken from
// *charge when not nil. Paths come from other users (the files their
// processes map, the build-id index, -symbols directories): a named pipe
// or a device is refused without blocking. Its symbol tables are read by
// [tableReader], within bounds.
func openELFFile(path string, charge *int64) (*elf.File, *os.File, error) {
	f, err := bpf.OpenRegular(path)
	if err != nil {
		return nil, nil, err
	}
	ef, err := newELFFile(f, charge)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return ef, f, nil
}

// newELFFile parses the headers of the ELF file f, reading at most
// maxELFHeaderRead bytes of it and nothing past its end; a table of
// section names over maxSectionNames is refused before debug/elf
// allocates for it.
func newELFFile(f *os.File, charge *int64) (*elf.File, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	r := &headerReaderAt{r: f, size: st.Size(), left: maxELFHeaderRead, charge: charge}
	if err := checkSectionNames(r); err != nil {
		return nil, err
	}
	return elf.NewFile(r)
}

// openELF reads the symbols, segments and build id of the ELF file at
// path, on budget b. The symbols come from the cache the symbolizers
// share when another has read them; a bound that stops them leaves the
// file with fewer symbols or none, and a note that says why.
func openELF(path string, b *symBudget) (*elfFile, error) {
	if note := b.spentNote(); note != "" {
		return &elfFile{path: path, note: note}, nil
	}
	ef, c, err := openELFFile(path, &b.read)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	e := &elfFile{path: path, buildID: elfBuildID(ef), loads: loadSegments(ef)}
	e.owner, e.perm = fileOwner(c)
	id, err := statID(c)
	if err != nil {
		return nil, err
	}
	key := symKey{file: id}
	// A stripped file (libc) has only its dynamic symbols: its debug
	// file, when installed, has them all.
	var dbg *debugELF
	if sectionOfType(ef, elf.SHT_SYMTAB) == nil && e.buildID != "" {
		if dbg = openDebugELF(e.buildID, &b.read); dbg != nil {
			defer dbg.c.Close()
			key.debug = dbg.id
		}
	}
	ent := sharedSymbols(key, func() *symEntry { return readSymbols(c, id, ef, dbg, b) })
	if why := b.hold(ent); why != "" {
		e.note = why
		return e, nil
	}
	e.syms, e.note = ent.syms, ent.note
	return e, nil
}

// spentNote says why no symbols are read on budget b, or "" when some
// may be.
func (b *symBudget) spentNote() string {
	switch {
	case b.read <= 0:
		return "symbols not read: " + errSpent().Error()
	case b.held <= 0:
		return "symbols not read: " + errHeld().Error()
	}
	return ""
}

// loadSegments returns the program headers of ef's loadable segments.
func loadSegments(ef *elf.File) []elf.ProgHeader {
	var loads []elf.ProgHeader
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			loads = append(loads, p.ProgHeader)
		}
	}
	return loads
}

// fileOwner returns the owner and permissions of the open file c, or
// ^0 (no one's) and none when they cannot be read.
func fileOwner(c *os.File) (uint32, os.FileMode) {
	st, err := c.Stat()
	if err != nil {
		return ^uint32(0), 0
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return ^uint32(0), 0
	}
	return sys.Uid, st.Mode().Perm()
}

// debugELF is the open debug file of a stripped ELF file.
type debugELF struct {
	ef *elf.File
	c  *os.File
	id fileID
}

// openDebugELF opens the debug file of build id buildID, charged to
// *charge, or returns nil when there is none or it has another build id.
// The caller closes the file it returns.
func openDebugELF(buildID string, charge *int64) *debugELF {
	df, c, err := openELFFile(debugPath(buildID), charge)
	if err != nil {
		return nil
	}
	if did, err := statID(c); err == nil && elfBuildID(df) == buildID {
		return &debugELF{ef: df, c: c, id: did}
	}
	c.Close()
	return nil
}

// readSymbols reads the function symbols of ef (open as c, of identity
// id) and of its debug file dbg (nil: none) on budget b, as the entry
// the symbolizers share.
func readSymbols(c *os.File, id fileID, ef *elf.File, dbg *debugELF, b *symBudget) *symEntry {
	r := &tableReader{f: c, size: id.size, ef: ef, budget: b}
	syms, note := r.readTables()
	if dbg != nil {
		d := &tableReader{f: dbg.c, size: dbg.id.size, ef: dbg.ef, budget: b, kept: r.kept}
		dsyms, dnote := d.readTables()
		syms = append(syms, dsyms...)
		if note == "" {
			note = dnote
		}
		r.kept, r.cut = d.kept, r.cut || d.cut
	}
	syms.sort()
	// A file written while it was read is not what its key names.
	now, err := statID(c)
	cost := entryCost + int64(len(note)) + r.kept
	return &symEntry{syms: syms, note: note, cost: cost, cut: r.cut || err != nil || now != id}
}

// frameAtOffset symbolizes a file offset (of an instruction in a mapped
// executable segment).
func (e *elfFile) frameAtOffset(off uint64) Frame {
	f := Frame{Addr: off, Module: e.path, Reason: e.note}
	if e.debugOnly && len(e.loads) > 0 {
		vaddr := off + e.loads[0].Vaddr&^0xfff
		if s, ok := e.syms.lookup(vaddr); ok {
			f.Symbol, f.Offset, f.Reason = s.name, vaddr-s.addr, ""
		}
		return f
	}
	for _, p := range e.loads {
		if off >= p.Off && off < p.Off+p.Filesz {
			vaddr := off - p.Off + p.Vaddr
			if s, ok := e.syms.lookup(vaddr); ok {
				f.Symbol, f.Offset, f.Reason = s.name, vaddr-s.addr, ""
			}
			break
		}
	}
	return f
}

// elfBuildID returns the hex GNU build id of an ELF file, or "": from its
// note segments (a stripped file may have no section headers).
func elfBuildID(ef *elf.File) string {
	for _, b := range elfNotes(ef) {
		if id := gnuBuildID(ef.ByteOrder, b); id != "" {
			return id
		}
	}
	return ""
}

// elfNotes returns the contents of ef's note segments, then of its note
// sections, each under 64 KiB.
func elfNotes(ef *elf.File) [][]byte {
	var notes [][]byte
	for _, p := range ef.Progs {
		if p.Type == elf.PT_NOTE && p.Filesz < 1<<16 {
			if b, err := io.ReadAll(p.Open()); err == nil {
				notes = append(notes, b)
			}
		}
	}
	for _, s := range ef.Sections {
		if s.Type == elf.SHT_NOTE && s.Size < 1<<16 {
			if b, err := s.Data(); err == nil {
				notes = append(notes, b)
			}
		}
	}
	return notes
}

// gnuBuildID returns the hex GNU build id among the notes b, or "": the
// walk stops at the first note whose sizes overrun b or 1 KiB.
func gnuBuildID(order binary.ByteOrder, b []byte) string {
	for len(b) >= 12 {
		nameSz, descSz, typ := order.Uint32(b), order.Uint32(b[4:]), order.Uint32(b[8:])
		nameEnd := 12 + (int(nameSz)+3)&^3
		descEnd := nameEnd + (int(descSz)+3)&^3
		if nameSz > 1<<10 || descSz > 1<<10 || descEnd > len(b) || nameEnd+int(descSz) > len(b) {
			return ""
		}
		if typ == 3 && string(bytes.TrimRight(b[12:12+nameSz], "\x00")) == "GNU" { // NT_GNU_BUILD_ID
			return hex.EncodeToString(b[nameEnd : nameEnd+int(descSz)])
		}
		b = b[descEnd:]
	}
	return ""
}

// FileBuildID returns the GNU build id of the ELF file at path, or "".
func FileBuildID(path string) string {
	ef, c, err := openELFFile(path, nil)
	if err != nil {
		return ""
	}
	defer c.Close()
	return elfBuildID(ef)
}

// mapping is one file-backed executable mapping of a process.
type mapping struct {
	start, end, off uint64
	path            string
	// open is where the file is opened: path, or when path names
	// another file here than the one mapped (the process runs in a mount
	// namespace of its own), the mapping's /proc/PID/map_files link.
	open string
	// elf is the file opened at open while the process ran (nil: not an
	// ELF file): its names stay the process's after it exits, whatever
	// open is by then.
	elf *elfFile
}

// UserSymbols resolves user addresses and build-id frames. It caches the
// files it opens; where each build id lives is remembered in an index
// file, so a process seen running once is symbolized after it exits.
// Only files no other user controls are indexed (see elfFile.distrust):
// another's claiming a build id names frames only as untrusted, and never
// enters the index.
type UserSymbols struct {
	mu    sync.Mutex
	files map[string]*elfFile // by path; nil: not an ELF file
	maps  map[Process]*procMaps
	// index maps a build id to the path of a file that has it, and that
	// no other user controls; claims to the first other file seen with it.
	index     map[string]string
	claims    map[string]string
	indexFile string
	dirty     bool
	dirs      []string
	scanned   map[string]bool // directories already searched
	// procsScanned is when the files of every running process were last
	// indexed: again at most once a second (an event stream outlives
	// processes).
	procsScanned time.Time
	// budget bounds the symbol tables read and held (elfsyms.go).
	budget *symBudget
}

// NewUserSymbols returns a user symbolizer. indexFile (may be "") keeps
// the build ids seen, across runs; dirs are searched for files by build
// id, besides /usr/lib/debug/.build-id, the files running processes map,
// the directories of $PATH and the usual library directories.
func NewUserSymbols(indexFile string, dirs []string) *UserSymbols {
	u := &UserSymbols{files: map[string]*elfFile{}, maps: map[Process]*procMaps{}, index: map[string]string{},
		claims: map[string]string{}, indexFile: indexFile, dirs: dirs, scanned: map[string]bool{}, budget: newSymBudget()}
	if indexFile != "" {
		if f, err := os.OpenFile(indexFile, os.O_RDONLY|syscall.O_NOFOLLOW, 0); err == nil {
			if b, err := io.ReadAll(io.LimitReader(f, 16<<20)); err == nil {
				_ = json.Unmarshal(b, &u.index)
			}
			f.Close()
		}
	}
	return u
}

// Save writes the build-id index back, when it learned something.
func (u *UserSymbols) Save() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.indexFile == "" || !u.dirty {
		return nil
	}
	b, err := json.MarshalIndent(u.index, "", "  ")
	if err != nil {
		return err
	}
	// A new file of its own (never through a link someone left there),
	// renamed over the index: the rename replaces a link, never follows it.
	tmp := fmt.Sprintf("%s.%d.tmp", u.indexFile, os.Getpid())
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, u.indexFile)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// file opens (once) the ELF file at path, and indexes its build id: in
// the index when no other user controls the file, else as a claim.
func (u *UserSymbols) file(path string) *elfFile {
	if e, ok := u.files[path]; ok {
		return e
	}
	if len(u.files) >= maxCachedFiles {
		u.files = map[string]*elfFile{}
		u.budget.release()
	}
	e, err := openELF(path, u.budget)
	if err != nil {
		e = nil
	}
	u.files[path] = e
	if e == nil || e.buildID == "" || strings.HasPrefix(path, "/usr/lib/debug/") || strings.HasPrefix(path, "/proc/") {
		return e
	}
	switch {
	case e.distrust(-1) != "":
		if _, ok := u.claims[e.buildID]; !ok && len(u.claims) < maxCachedFiles {
			u.claims[e.buildID] = path
		}
	case u.index[e.buildID] != path:
		u.index[e.buildID] = path
		u.dirty = true
	}
	return e
}

// procMaps is what a process maps, read while it was the process
// recorded, and the uid it runs as.
type procMaps struct {
	maps []mapping
	uid  int
	ok   bool // it ran when read (else maps is empty)
}

// processMaps reads the executable file mappings of a process and opens
// their files, while it runs (checked before and after: its pid may be
// another's by then), and indexes the build ids of its files.
func (u *UserSymbols) processMaps(p Process) *procMaps {
	if m, ok := u.maps[p]; ok {
		return m
	}
	pm := &procMaps{uid: -1}
	if uid, ok := p.Running(); ok {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", p.PID)); err == nil {
			pm.maps = parseMaps(string(b))
			for i := range pm.maps {
				m := &pm.maps[i]
				m.open = mappedFile(p.PID, m)
				if m.open != m.path {
					delete(u.files, m.open) // another process's, with this pid before
				}
				m.elf = u.file(m.open)
			}
			if _, still := p.Running(); still {
				pm.uid, pm.ok = uid, true
			} else {
				pm.maps = nil
			}
		}
	}
	if len(u.maps) >= maxCachedFiles {
		u.maps = map[Process]*procMaps{}
	}
	u.maps[p] = pm
	return pm
}

// mappedFile is where to open the file of mapping m of process pid: its
// path, when that is the file mapped (the same inode), else the
// mapping's own link in /proc/PID/map_files (root may open it). Without
// that link (no privilege, an old kernel), the path.
func mappedFile(pid int, m *mapping) string {
	link := fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.start, m.end)
	var mapped, named syscall.Stat_t
	if syscall.Stat(link, &mapped) != nil {
		return m.path
	}
	if syscall.Stat(m.path, &named) == nil && named.Dev == mapped.Dev && named.Ino == mapped.Ino {
		return m.path
	}
	return link
}

// parseMaps parses /proc/PID/maps, keeping executable file mappings.
func parseMaps(text string) []mapping {
	var out []mapping
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(f[1], "x") || !strings.HasPrefix(f[5], "/") {
			continue
		}
		// The path is the rest of the line after the inode, as it is
		// (a name may hold runs of spaces): the kernel pads before it.
		rest := line
		for i := 0; i < 5; i++ {
			rest = strings.TrimLeft(rest, " ")
			if j := strings.IndexByte(rest, ' '); j >= 0 {
				rest = rest[j:]
			}
		}
		path := strings.TrimLeft(rest, " ")
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		if strings.HasSuffix(path, " (deleted)") {
			continue
		}
		out = append(out, mapping{start: start, end: end, off: off, path: path, open: path})
	}
	return out
}

// FrameAt symbolizes address ip of process p through its maps, while it
// runs (checked at each call). After it has exited, the maps read while it
// ran still name its addresses when p was recorded with its start time
// (a pid alone may have been another process's when they were read); an
// address no maps read name (or of a pid that is another's now) keeps its
// address and says the process exited ([Process.Exited]).
func (u *UserSymbols) FrameAt(p Process, ip uint64) Frame {
	_, running := p.Running()
	u.mu.Lock()
	defer u.mu.Unlock()
	if !running {
		return u.exitedFrame(p, ip)
	}
	pm := u.processMaps(p)
	f, ok := u.frameIn(pm, ip)
	if !ok && pm.ok {
		// The process may have mapped more since (dlopen).
		delete(u.maps, p)
		if again := u.processMaps(p); again.ok {
			f, ok = u.frameIn(again, ip)
		} else {
			u.maps[p] = pm // it exited meanwhile: what it mapped is still known
			return u.exitedFrame(p, ip)
		}
	}
	if !ok && !pm.ok {
		f.Note = p.Exited()
	}
	return f
}

// exitedFrame symbolizes ip of p, which has exited, through the maps
// read while it ran, when p is known by its start time; else, and when
// they name no file at ip, it is the address and that p exited.
func (u *UserSymbols) exitedFrame(p Process, ip uint64) Frame {
	if pm := u.maps[p]; pm != nil && pm.ok && p.Start&ProcessStarted != 0 {
		if f, ok := u.frameIn(pm, ip); ok {
			return f
		}
	}
	return Frame{Addr: ip, Note: p.Exited()}
}

// Refresh forgets the files opened (they are read again as they are now:
// replaced, or another's at a path) and the maps of the processes known
// by pid alone (the pid may be another's now). The maps of processes
// known by their start time stay, with the files they mapped: their
// addresses are named after they exit.
func (u *UserSymbols) Refresh() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.files = map[string]*elfFile{}
	u.budget.release()
	u.forgetPIDOnly()
}

// forgetPIDOnly forgets the maps of the processes known by pid alone.
func (u *UserSymbols) forgetPIDOnly() {
	for p := range u.maps {
		if p.Start&ProcessStarted == 0 {
			delete(u.maps, p)
		}
	}
}

func (u *UserSymbols) frameIn(pm *procMaps, ip uint64) (Frame, bool) {
	for _, m := range pm.maps {
		if ip >= m.start && ip < m.end {
			if e := m.elf; e != nil {
				f := e.frameAtOffset(ip - m.start + m.off)
				f.Addr, f.Module = ip, m.path
				f.BuildID, f.MapStart, f.MapLimit, f.MapOffset = e.buildID, m.start, m.end, m.off
				return f, true
			}
			return Frame{Addr: ip, Module: m.path, MapStart: m.start, MapLimit: m.end, MapOffset: m.off}, true
		}
	}
	return Frame{Addr: ip}, false
}

// FrameByBuildID symbolizes offset off in the file whose build id is id
// (hex), of process p. Addr is the offset. While p runs, a file it maps
// with that build id is its; else a file root, this user or p's user owns
// (and no other may write); else the first other file found claiming it
// names the frame with a note saying whose it is. A process known by its
// pid alone (no start time recorded) may be another now: neither its
// maps nor its user vouch for a file.
func (u *UserSymbols) FrameByBuildID(p Process, id string, off uint64) Frame {
	u.mu.Lock()
	defer u.mu.Unlock()
	pm, uid := u.processMaps(p), -1
	if p.Start&ProcessStarted != 0 {
		uid = pm.uid
	}
	for _, m := range pm.maps {
		if e := m.elf; e != nil && e.buildID == id && (uid >= 0 || e.distrust(-1) == "") {
			f := e.frameAtOffset(off)
			f.Module, f.BuildID = m.path, id
			return f
		}
	}
	e := u.byBuildID(id, uid)
	if e == nil {
		return Frame{Addr: off, Module: "build-id " + id, BuildID: id}
	}
	f := e.frameAtOffset(off)
	f.Note, f.BuildID = e.distrust(uid), id
	return f
}

// byBuildID finds the file with build id id that a process of uid (-1:
// none known) may have run: from the index (checked again: the file may
// have been replaced), the files running processes map, the search
// directories, then the debug directory; none believed, the first file
// seen claiming it (see [elfFile.distrust]), or nil.
func (u *UserSymbols) byBuildID(id string, uid int) *elfFile {
	if e := u.indexed(id, uid); e != nil {
		return e
	}
	if e := u.rescanProcesses(id, uid); e != nil {
		return e
	}
	if e := u.searchDirs(id, uid); e != nil {
		return e
	}
	// Only the debug file: its symbols, and offsets as laid out usually.
	if e := u.believed(debugPath(id), id, uid); e != nil && len(e.loads) > 0 {
		e.debugOnly = true
		return e
	}
	if path, ok := u.claims[id]; ok {
		if e := u.file(path); e != nil && e.buildID == id {
			return e
		}
	}
	return nil
}

// believed returns the file at path when it has build id id and no other
// user than a process of uid controls it, or nil.
func (u *UserSymbols) believed(path, id string, uid int) *elfFile {
	if e := u.file(path); e != nil && e.buildID == id && e.distrust(uid) == "" {
		return e
	}
	return nil
}

// indexed returns the believed file the index names for build id id, or
// nil; an entry no longer believed leaves the index.
func (u *UserSymbols) indexed(id string, uid int) *elfFile {
	path, ok := u.index[id]
	if !ok {
		return nil
	}
	if e := u.believed(path, id, uid); e != nil {
		return e
	}
	delete(u.index, id)
	u.dirty = true
	return nil
}

// rescanProcesses reads the maps of every running process again, at most
// once a second, and returns the believed file the index then names for
// build id id, or nil.
func (u *UserSymbols) rescanProcesses(id string, uid int) *elfFile {
	if time.Since(u.procsScanned) <= time.Second {
		return nil
	}
	u.procsScanned = time.Now()
	if ents, err := os.ReadDir("/proc"); err == nil {
		u.forgetPIDOnly() // read again below; those known by start time stay, to name them after they exit
		for _, d := range ents {
			if pid, err := strconv.Atoi(d.Name()); err == nil {
				u.processMaps(Process{PID: pid})
			}
		}
	}
	if path, ok := u.index[id]; ok {
		return u.believed(path, id, uid)
	}
	return nil
}

// searchDirs looks for a believed file of build id id in the search
// directories, $PATH and libDirs, each directory read once.
func (u *UserSymbols) searchDirs(id string, uid int) *elfFile {
	dirs := append([]string(nil), u.dirs...)
	dirs = append(dirs, filepath.SplitList(os.Getenv("PATH"))...)
	dirs = append(dirs, libDirs...)
	for _, dir := range dirs {
		if dir == "" || u.scanned[dir] {
			continue
		}
		u.scanned[dir] = true
		if e := u.searchDir(dir, id, uid); e != nil {
			return e
		}
	}
	return nil
}

// searchDir looks for a believed file of build id id among the regular
// files and symbolic links of dir that are not yet known.
func (u *UserSymbols) searchDir(dir, id string, uid int) *elfFile {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, d := range ents {
		if !d.Type().IsRegular() && d.Type()&os.ModeSymlink == 0 {
			continue
		}
		path := filepath.Join(dir, d.Name())
		if _, known := u.files[path]; known {
			continue
		}
		if buildIDOf(path) == id {
			if e := u.believed(path, id, uid); e != nil {
				return e
			}
		}
	}
	return nil
}

// libDirs are searched for a file by build id after $PATH.
var libDirs = []string{"/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu"}

// buildIDOf reads only the build id of a file (cheaply: no symbols).
func buildIDOf(path string) string {
	f, err := bpf.OpenRegular(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != elf.ELFMAG {
		return ""
	}
	ef, err := newELFFile(f, nil)
	if err != nil {
		return ""
	}
	return elfBuildID(ef)
}

// maxCachedFiles bounds the ELF files a symbolizer keeps (their symbols),
// and the processes whose maps it keeps: beyond, it forgets them all and
// reads again what it needs.
var maxCachedFiles = 4096

// KernelAddresses reads from /proc/kallsyms the addresses of the named
// kernel symbols (variables or functions, the first of a name listed
// twice), for kaddr. A name kallsyms lacks is an error naming it; so is
// one it lists at 0, an address hidden (kptr_restrict, or not root).
func KernelAddresses(names []string) (map[string]uint64, error) {
	f, err := os.Open("/proc/kallsyms")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return kernelAddresses(f, names)
}

func kernelAddresses(r io.Reader, names []string) (map[string]uint64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	found := map[string]uint64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || !want[fields[2]] {
			continue
		}
		if _, seen := found[fields[2]]; seen {
			continue
		}
		addr, err := strconv.ParseUint(fields[0], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("/proc/kallsyms: %s: bad address %q", fields[2], fields[0])
		}
		found[fields[2]] = addr
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, n := range names {
		addr, ok := found[n]
		switch {
		case !ok:
			return nil, fmt.Errorf("kernel symbol %q is not in /proc/kallsyms: this kernel has no such variable", n)
		case addr == 0:
			return nil, fmt.Errorf("kernel symbol %q: /proc/kallsyms hides its address (kptr_restrict, or not root): run as root with kernel.kptr_restrict at 0 or 1", n)
		}
	}
	return found, nil
}
