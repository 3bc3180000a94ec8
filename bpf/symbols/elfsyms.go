package symbols

import (
	"container/list"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"syscall"
)

// Reading the symbol tables of ELF files within bounds. The files are
// other users' (whatever their processes map): a header may claim any
// size, and a sparse file costs nothing to make however large it says it
// is. So a table is checked against the file before it is read (it must
// lie inside the file, and be under a hard bound), read in small chunks
// keeping only function symbols (a hole reads as empty entries, which are
// dropped: what is kept is linear in the file's real contents), and every
// symbolizer (one show, one scrape, one run) has a budget of bytes read
// and of symbols held. What a bound stops is no error: the file's frames
// show unsymbolized, with the reason. The symbols read are shared by the
// symbolizers of a process (concurrent scrapes read a file once), in a
// cache bounded by size.

// The bounds. Variables so that tests may lower them.
var (
	// maxELFHeaderRead bounds what is read of one file to parse its
	// headers, section names and notes (debug/elf): 65,535 section
	// headers are 4 MiB.
	maxELFHeaderRead int64 = 8 << 20
	// maxSectionNames bounds a file's table of section names (a real
	// one is a few hundred bytes).
	maxSectionNames uint64 = 1 << 20
	// maxTableBytes bounds one symbol table (.symtab or .dynsym) of a
	// file, and what is read of the string table its names are in.
	maxTableBytes int64 = 256 << 20
	// maxFileSymBytes bounds the memory of the symbols kept of one file
	// (its tables and its debug file's): some 400,000 functions.
	maxFileSymBytes int64 = 32 << 20
	// budgetRead bounds the bytes one symbolizer reads of ELF files
	// (headers, notes, symbol and string tables).
	budgetRead int64 = 1 << 30
	// budgetHeld bounds the memory of the symbols one symbolizer holds.
	budgetHeld int64 = 64 << 20
	// sharedSymBytes bounds the symbols the symbolizers of a process
	// share, least recently used dropped first. With the agent's four
	// scrapes at once, what symbols hold stays under the GOMEMLIMIT of
	// deploy/ (384 MiB).
	sharedSymBytes int64 = 96 << 20
)

const (
	// maxSymName bounds a symbol's name (longer ones are cut).
	maxSymName = 4096
	// symCost is what a kept symbol costs besides its name's bytes.
	symCost = 48
	// entryCost is what a cached file costs besides its symbols (even
	// one with none: a user may make millions of files).
	entryCost = 256
	// chunk is what is read of a table at a time.
	chunk = 64 << 10
)

// symBudget is what a symbolizer may still read and hold.
type symBudget struct {
	read, held int64
	// holding: the shared entries held, each charged once.
	holding map[*symEntry]bool
}

func newSymBudget() *symBudget {
	return &symBudget{read: budgetRead, held: budgetHeld, holding: map[*symEntry]bool{}}
}

// release starts the budget again: the symbolizer dropped its files (a
// long-lived one, as events -follow's, after maxCachedFiles of them).
func (b *symBudget) release() {
	b.read, b.held, b.holding = budgetRead, budgetHeld, map[*symEntry]bool{}
}

// hold charges entry e to the budget, or says why it cannot be held.
func (b *symBudget) hold(e *symEntry) string {
	if b.holding[e] {
		return ""
	}
	if e.cost > b.held {
		return "symbols not read: " + errHeld().Error()
	}
	b.held -= e.cost
	b.holding[e] = true
	return ""
}

// fileID is a file's identity and version: a file rewritten (even with
// its mtime set back) has another ctime.
type fileID struct {
	dev, ino           uint64
	size, mtime, ctime int64
}

func statID(f *os.File) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fileID{}, err
	}
	return fileID{uint64(st.Dev), uint64(st.Ino), st.Size, st.Mtim.Nano(), st.Ctim.Nano()}, nil
}

// symKey names the symbols of a file and of its debug file (zero: none).
type symKey struct{ file, debug fileID }

// symEntry is the function symbols of a file (sorted), and why some or
// all are missing ("": none is).
type symEntry struct {
	syms symtab
	note string
	cost int64
	// cut: a symbolizer's budget stopped the read; the entry is that
	// symbolizer's only, never shared.
	cut   bool
	ready chan struct{}
	elem  *list.Element
}

// shared is the symbol cache of the process.
var shared = struct {
	sync.Mutex
	m     map[symKey]*symEntry
	lru   list.List // of symKey, most recently used first
	bytes int64
}{m: map[symKey]*symEntry{}}

// sharedSymbols returns the symbols of key k: cached, being read by
// another symbolizer (waited for), or read by load now.
func sharedSymbols(k symKey, load func() *symEntry) *symEntry {
	for {
		shared.Lock()
		e, ok := shared.m[k]
		if ok {
			if e.elem != nil {
				shared.lru.MoveToFront(e.elem)
			}
			shared.Unlock()
			<-e.ready
			if e.cut {
				continue // read again, on this symbolizer's budget
			}
			return e
		}
		e = &symEntry{ready: make(chan struct{})}
		shared.m[k] = e
		shared.Unlock()
		var r *symEntry
		func() {
			defer func() {
				if r == nil { // load panicked: the waiters read again
					r = &symEntry{cut: true}
				}
				shared.Lock()
				e.syms, e.note, e.cost, e.cut = r.syms, r.note, r.cost, r.cut
				if e.cut || e.cost > sharedSymBytes {
					delete(shared.m, k)
				} else {
					e.elem = shared.lru.PushFront(k)
					shared.bytes += e.cost
					for shared.bytes > sharedSymBytes && shared.lru.Len() > 1 {
						old := shared.lru.Back()
						ok := old.Value.(symKey)
						shared.bytes -= shared.m[ok].cost
						delete(shared.m, ok)
						shared.lru.Remove(old)
					}
				}
				shared.Unlock()
				close(e.ready)
			}()
			r = load()
		}()
		return e
	}
}

// tableReader reads the symbol tables of one file within the bounds.
type tableReader struct {
	f      *os.File
	size   int64 // the file's
	ef     *elf.File
	budget *symBudget
	kept   int64 // memory of the symbols kept, of this file
	cut    bool  // the budget stopped a read
}

// errBound is a bound a table is over: the table is not read.
type errBound struct{ reason string }

func (e errBound) Error() string { return e.reason }

// errSpent says that the budget of bytes read is spent.
func errSpent() error {
	return errBound{fmt.Sprintf("the %s of symbol tables one command or scrape may read are spent", sizeText(uint64(budgetRead)))}
}

// readTables reads the function symbols of ef's .symtab and .dynsym. A
// table that cannot be read within the bounds is left out, and note says
// why.
func (r *tableReader) readTables() (symtab, string) {
	var out symtab
	var note string
	for _, typ := range []elf.SectionType{elf.SHT_SYMTAB, elf.SHT_DYNSYM} {
		sec := sectionOfType(r.ef, typ)
		if sec == nil {
			continue
		}
		syms, err := r.readTable(sec)
		if err != nil {
			if note == "" {
				note = "symbols not read: " + err.Error()
			}
			continue
		}
		out = append(out, syms...)
	}
	return out, note
}

func sectionOfType(ef *elf.File, typ elf.SectionType) *elf.Section {
	for _, s := range ef.Sections {
		if s.Type == typ {
			return s
		}
	}
	return nil
}

// inFile checks that a section of size bytes at off lies in the file and
// under the bounds.
func (r *tableReader) inFile(name string, off, size uint64) error {
	switch {
	case off > uint64(r.size) || size > uint64(r.size)-off:
		return errBound{fmt.Sprintf("%s claims %s at offset %#x, past the end of the %s file", name, sizeText(size), off, sizeText(uint64(r.size)))}
	case size > uint64(maxTableBytes):
		return errBound{fmt.Sprintf("%s of %s is over the %s bound of a symbol table", name, sizeText(size), sizeText(uint64(maxTableBytes)))}
	case int64(size) > r.budget.read:
		r.cut = true
		return errSpent()
	}
	return nil
}

// sizeText is a size as a reason says it: "505 MiB", "16 KiB", "900 bytes".
func sizeText(n uint64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0 || n >= 10<<20:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0 || n >= 10<<10:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// overKept says which bound the symbols kept of table name are over: the
// file's, or what the symbolizer may still hold (then the read is cut:
// another symbolizer may hold them).
func (r *tableReader) overKept(name string) error {
	if r.kept > maxFileSymBytes {
		return errBound{fmt.Sprintf("%s holds over %s of function symbols, the bound of one file", name, sizeText(uint64(maxFileSymBytes)))}
	}
	r.cut = true
	return errHeld()
}

// errHeld says that the budget of symbols held is spent.
func errHeld() error {
	return errBound{fmt.Sprintf("the %s of symbols one command or scrape may hold are spent", sizeText(uint64(budgetHeld)))}
}

// pendingSym is a function symbol whose name is still to be read.
type pendingSym struct {
	nameOff    uint32
	addr, size uint64
}

// readTable reads the function symbols of one table: its entries in
// chunks, then the names of those kept, from its string table.
func (r *tableReader) readTable(sec *elf.Section) (symtab, error) {
	entSize := uint64(elf.Sym64Size)
	if r.ef.Class == elf.ELFCLASS32 {
		entSize = elf.Sym32Size
	}
	if sec.Size%entSize != 0 {
		return nil, errBound{fmt.Sprintf("%s of %d bytes is no whole number of %d-byte entries", sec.Name, sec.Size, entSize)}
	}
	if err := r.inFile(sec.Name, sec.Offset, sec.Size); err != nil {
		return nil, err
	}
	if int(sec.Link) <= 0 || int(sec.Link) >= len(r.ef.Sections) || r.ef.Sections[sec.Link].Type != elf.SHT_STRTAB {
		return nil, errBound{fmt.Sprintf("%s links to no string table", sec.Name)}
	}
	str := r.ef.Sections[sec.Link]
	if err := r.inFile(str.Name, str.Offset, str.Size); err != nil {
		return nil, err
	}
	kept := r.kept
	out, err := r.entries(sec, str, entSize)
	if err != nil {
		r.kept = kept // the table is left out
	}
	return out, err
}

// entries reads the entries of table sec, then the names of the function
// symbols among them.
func (r *tableReader) entries(sec, str *elf.Section, entSize uint64) (symtab, error) {
	bo := r.ef.ByteOrder
	var pend []pendingSym
	buf := make([]byte, chunk/entSize*entSize)
	for done := uint64(0); done < sec.Size; {
		n := min(uint64(len(buf)), sec.Size-done)
		if _, err := r.f.ReadAt(buf[:n], int64(sec.Offset+done)); err != nil {
			return nil, fmt.Errorf("%s: %w", sec.Name, err)
		}
		r.budget.read -= int64(n)
		for e := buf[:n]; len(e) >= int(entSize); e = e[entSize:] {
			var p pendingSym
			var info byte
			var shndx uint16
			if entSize == elf.Sym64Size {
				p.nameOff, info, shndx = bo.Uint32(e), e[4], bo.Uint16(e[6:])
				p.addr, p.size = bo.Uint64(e[8:]), bo.Uint64(e[16:])
			} else {
				p.nameOff, info, shndx = bo.Uint32(e), e[12], bo.Uint16(e[14:])
				p.addr, p.size = uint64(bo.Uint32(e[4:])), uint64(bo.Uint32(e[8:]))
			}
			if elf.ST_TYPE(info) != elf.STT_FUNC || p.addr == 0 || elf.SectionIndex(shndx) == elf.SHN_UNDEF ||
				p.nameOff == 0 || uint64(p.nameOff) >= str.Size {
				continue
			}
			if r.kept += symCost; r.kept > maxFileSymBytes || r.kept > r.budget.held {
				return nil, r.overKept(sec.Name)
			}
			pend = append(pend, p)
		}
		done += n
	}
	return r.names(str, pend)
}

// names reads the names of the symbols pend from string table str, in
// the order of their offsets, a chunk at a time; the symbols keep the
// table's order (of aliases at one address, lookup gives the last).
func (r *tableReader) names(str *elf.Section, pend []pendingSym) (symtab, error) {
	order := make([]int32, len(pend))
	for i := range order {
		order[i] = int32(i)
	}
	sort.SliceStable(order, func(i, j int) bool { return pend[order[i]].nameOff < pend[order[j]].nameOff })
	names := make([]string, len(pend))
	buf := make([]byte, chunk)
	var win []byte    // what was last read of str
	var winOff uint64 // its offset in str
	last, lastOff := "", uint32(0)
	for _, i := range order {
		p := pend[i]
		if p.nameOff == lastOff {
			names[i] = last
			continue
		}
		// The window holds the longest name there may be at off: a
		// window is read again only some 60 KiB further on.
		off := uint64(p.nameOff)
		end := min(off+maxSymName+1, str.Size)
		if off < winOff || end > winOff+uint64(len(win)) {
			n := min(uint64(len(buf)), str.Size-off)
			if int64(n) > r.budget.read {
				r.cut = true
				return nil, errSpent()
			}
			if _, err := r.f.ReadAt(buf[:n], int64(str.Offset+off)); err != nil {
				return nil, fmt.Errorf("%s: %w", str.Name, err)
			}
			r.budget.read -= int64(n)
			win, winOff = buf[:n], off
		}
		name := win[off-winOff : end-winOff]
		if i := indexZero(name); i >= 0 {
			name = name[:i]
		} else if len(name) > maxSymName {
			name = name[:maxSymName]
		}
		if r.kept += int64(len(name)); r.kept > maxFileSymBytes || r.kept > r.budget.held {
			return nil, r.overKept(str.Name)
		}
		last, lastOff = string(name), p.nameOff
		names[i] = last
	}
	out := make(symtab, 0, len(pend))
	for i, p := range pend {
		if names[i] != "" {
			out = append(out, sym{addr: p.addr, size: p.size, name: names[i]})
		}
	}
	return out, nil
}

func indexZero(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// headerReaderAt is what debug/elf reads a file through: reads past the
// file's end fail, and reads fail once left bytes have been read. What
// is read is taken from *charge too (a budget), when not nil.
type headerReaderAt struct {
	r      io.ReaderAt
	size   int64
	left   int64
	charge *int64
}

func (b *headerReaderAt) ReadAt(p []byte, off int64) (int, error) {
	switch {
	case off < 0 || off >= b.size:
		return 0, io.EOF
	case int64(len(p)) > b.left:
		return 0, fmt.Errorf("more than %d MiB of headers and notes read from one ELF file", maxELFHeaderRead>>20)
	}
	want := len(p)
	if int64(want) > b.size-off {
		p = p[:b.size-off]
	}
	b.left -= int64(len(p))
	if b.charge != nil {
		*b.charge -= int64(len(p))
	}
	n, err := b.r.ReadAt(p, off)
	if err == nil && n < want {
		err = io.EOF
	}
	return n, err
}

// checkSectionNames refuses a file whose section-name table claims more
// than maxSectionNames or lies past the file's end: debug/elf allocates
// what it claims (up to 10 MiB at a time) before reading it.
func checkSectionNames(r *headerReaderAt) error {
	var h [64]byte
	if _, err := r.ReadAt(h[:], 0); err != nil && err != io.EOF {
		return err
	}
	t, ok := sectionTableOf(h[:])
	if !ok {
		return nil // debug/elf says what it is not
	}
	off, size, ok := t.sectionNames(r)
	if !ok {
		return nil // debug/elf says what is wrong
	}
	switch {
	case size > maxSectionNames:
		return fmt.Errorf("its section names claim %s, over the %s bound", sizeText(size), sizeText(maxSectionNames))
	case off > uint64(r.size) || size > uint64(r.size)-off:
		return fmt.Errorf("its section names claim %s at offset %#x, past the end of the %s file", sizeText(size), off, sizeText(uint64(r.size)))
	}
	return nil
}

// sectionTable is where an ELF header puts its section headers, and
// which holds the section names.
type sectionTable struct {
	bo                  binary.ByteOrder
	shoff, entsize, idx uint64
	hdrSize             int // of one section header: 64 or 40
}

// sectionTableOf reads the section table of the ELF header h, and whether
// h has one with a name section (false too when h is no ELF header).
func sectionTableOf(h []byte) (sectionTable, bool) {
	if string(h[:4]) != elf.ELFMAG {
		return sectionTable{}, false
	}
	t := sectionTable{bo: binary.LittleEndian}
	if elf.Data(h[elf.EI_DATA]) == elf.ELFDATA2MSB {
		t.bo = binary.BigEndian
	}
	bo := t.bo
	switch elf.Class(h[elf.EI_CLASS]) {
	case elf.ELFCLASS64:
		t.shoff, t.entsize, t.idx = bo.Uint64(h[0x28:]), uint64(bo.Uint16(h[0x3a:])), uint64(bo.Uint16(h[0x3e:]))
		t.hdrSize = 64
	case elf.ELFCLASS32:
		t.shoff, t.entsize, t.idx = uint64(bo.Uint32(h[0x20:])), uint64(bo.Uint16(h[0x2e:])), uint64(bo.Uint16(h[0x32:]))
		t.hdrSize = 40
	default:
		return sectionTable{}, false
	}
	if t.shoff == 0 || t.idx == uint64(elf.SHN_UNDEF) || t.entsize < uint64(t.hdrSize) {
		return sectionTable{}, false
	}
	return t, true
}

// sectionNames returns the offset and size of the section-name table,
// and whether its section header could be read.
func (t sectionTable) sectionNames(r *headerReaderAt) (off, size uint64, ok bool) {
	hdr := make([]byte, t.hdrSize)
	idx := t.idx
	if idx == uint64(elf.SHN_XINDEX) { // the index is section 0's link
		if _, err := r.ReadAt(hdr, int64(t.shoff)); err != nil {
			return 0, 0, false
		}
		link := 24 // sh_link
		if t.hdrSize == 64 {
			link = 40
		}
		idx = uint64(t.bo.Uint32(hdr[link:]))
	}
	if _, err := r.ReadAt(hdr, int64(t.shoff+idx*t.entsize)); err != nil {
		return 0, 0, false
	}
	if t.hdrSize == 64 {
		return t.bo.Uint64(hdr[24:]), t.bo.Uint64(hdr[32:]), true
	}
	return uint64(t.bo.Uint32(hdr[16:])), uint64(t.bo.Uint32(hdr[20:])), true
}
