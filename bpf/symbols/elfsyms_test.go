package symbols

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/probectl/probectl/bpf"
)

// testELF is a small 64-bit ELF file made by the tests: one executable
// segment (offset 0 at 0x400000) whose .text at file offset 0x1000 holds
// the functions fn0, fn1, ... of 16 bytes each, a .symtab naming them
// (its header may claim more than it holds), .strtab and .shstrtab.
type testELF struct {
	funcs int
	// claim, when not 0, is the size the .symtab header claims.
	claim uint64
	// symtabOff is where .symtab is (set by bytes).
	symtabOff uint64
}

const testText = 0x1000

func (t *testELF) bytes() []byte {
	le := binary.LittleEndian
	b := make([]byte, testText+0x1000)
	for i := testText; i < len(b); i++ {
		b[i] = 0xc3 // ret
	}
	strtab := []byte{0}
	var symtab []byte
	symtab = append(symtab, make([]byte, elf.Sym64Size)...) // the null symbol
	for i := 0; i < t.funcs; i++ {
		e := make([]byte, elf.Sym64Size)
		le.PutUint32(e, uint32(len(strtab)))
		e[4] = byte(elf.STB_GLOBAL)<<4 | byte(elf.STT_FUNC)
		le.PutUint16(e[6:], 1) // .text
		le.PutUint64(e[8:], 0x400000+testText+uint64(i)*16)
		le.PutUint64(e[16:], 16)
		symtab = append(symtab, e...)
		strtab = append(strtab, fmt.Sprintf("fn%d\x00", i)...)
	}
	shstrtab := []byte("\x00.text\x00.symtab\x00.strtab\x00.shstrtab\x00")
	strOff := uint64(len(b))
	b = append(b, strtab...)
	shstrOff := uint64(len(b))
	b = append(b, shstrtab...)
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	shOff := uint64(len(b))
	symSize := uint64(len(symtab))
	if t.claim != 0 {
		symSize = t.claim
	}
	// The symbol table last: a claim past what it holds reads the hole
	// after it, or past the file's end.
	t.symtabOff = shOff + 5*64
	sh := func(name uint32, typ elf.SectionType, flags elf.SectionFlag, addr, off, size uint64, link uint32, entsize uint64) []byte {
		h := make([]byte, 64)
		le.PutUint32(h, name)
		le.PutUint32(h[4:], uint32(typ))
		le.PutUint64(h[8:], uint64(flags))
		le.PutUint64(h[16:], addr)
		le.PutUint64(h[24:], off)
		le.PutUint64(h[32:], size)
		le.PutUint32(h[40:], link)
		le.PutUint64(h[48:], 8)
		le.PutUint64(h[56:], entsize)
		return h
	}
	b = append(b, make([]byte, 64)...)
	b = append(b, sh(1, elf.SHT_PROGBITS, elf.SHF_ALLOC|elf.SHF_EXECINSTR, 0x400000+testText, testText, 0x1000, 0, 0)...)
	b = append(b, sh(7, elf.SHT_SYMTAB, 0, 0, t.symtabOff, symSize, 3, elf.Sym64Size)...)
	b = append(b, sh(15, elf.SHT_STRTAB, 0, 0, strOff, uint64(len(strtab)), 0, 0)...)
	b = append(b, sh(23, elf.SHT_STRTAB, 0, 0, shstrOff, uint64(len(shstrtab)), 0, 0)...)
	b = append(b, symtab...)

	// The ELF header and the one program header.
	copy(b, elf.ELFMAG)
	b[4], b[5], b[6] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	le.PutUint16(b[16:], uint16(elf.ET_DYN))
	machine := elf.EM_X86_64
	if goruntime.GOARCH == "arm64" {
		machine = elf.EM_AARCH64
	}
	le.PutUint16(b[18:], uint16(machine))
	le.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	le.PutUint64(b[24:], 0x400000+testText)
	le.PutUint64(b[32:], 64)    // phoff
	le.PutUint64(b[40:], shOff) // shoff
	le.PutUint16(b[52:], 64)    // ehsize
	le.PutUint16(b[54:], 56)    // phentsize
	le.PutUint16(b[56:], 1)     // phnum
	le.PutUint16(b[58:], 64)    // shentsize
	le.PutUint16(b[60:], 5)     // shnum
	le.PutUint16(b[62:], 4)     // shstrndx
	ph := b[64:]
	le.PutUint32(ph, uint32(elf.PT_LOAD))
	le.PutUint32(ph[4:], uint32(elf.PF_R|elf.PF_X))
	le.PutUint64(ph[16:], 0x400000) // vaddr
	le.PutUint64(ph[24:], 0x400000) // paddr
	le.PutUint64(ph[32:], testText+0x1000)
	le.PutUint64(ph[40:], testText+0x1000)
	le.PutUint64(ph[48:], 0x1000)
	return b
}

// write writes the file at path; with sparse, it is made as long as its
// .symtab claims (a hole: its blocks stay those written).
func (t *testELF) write(tb testing.TB, path string, sparse bool) {
	tb.Helper()
	if err := os.WriteFile(path, t.bytes(), 0o755); err != nil {
		tb.Fatal(err)
	}
	if sparse {
		if err := os.Truncate(path, int64(t.symtabOff+t.claim)); err != nil {
			tb.Fatal(err)
		}
	}
}

// mapExec maps the first two pages of path executable in this process,
// as a process runs a file, and returns the address of fn0.
func mapExec(t *testing.T, path string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 2*testText, syscall.PROT_READ|syscall.PROT_EXEC, syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap PROT_EXEC of %s: %v (a noexec file system)", path, err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	return uint64(uintptr(unsafe.Pointer(&mem[0]))) + testText
}

// resetShared empties the cache the symbolizers share.
func resetShared(t *testing.T) {
	t.Helper()
	shared.Lock()
	shared.m, shared.bytes = map[symKey]*symEntry{}, 0
	shared.lru.Init()
	shared.Unlock()
}

// heapUse runs fn and returns the bytes allocated meanwhile.
func heapUse(fn func()) uint64 {
	var before, after goruntime.MemStats
	goruntime.ReadMemStats(&before)
	fn()
	goruntime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The original failure: a user's process maps a sparse file (8 KiB
// written) whose .symtab header claims 530 MB; symbolizing a frame in it
// read and decoded the whole claim (debug/elf's Symbols: 3.5 GB, 30 s),
// at every show and every scrape. Now the table is refused before it is
// read, the frame shows unsymbolized with the reason, and what one
// symbolizer allocates is bounded; three at once read the file once.
func TestHostileSymbolTable(t *testing.T) {
	resetShared(t)
	dir := t.TempDir()
	hostile := &testELF{funcs: 4, claim: 22083334 * elf.Sym64Size} // 530,000,016 bytes
	path := filepath.Join(dir, "hostile")
	hostile.write(t, path, true)
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes long, %d bytes in blocks", path, st.Size, st.Blocks*512)
	ip := mapExec(t, path) + 16 + 4 // fn1+4

	var frames [3]Frame
	alloc := heapUse(func() {
		var wg sync.WaitGroup
		for i := range frames {
			wg.Add(1)
			go func() {
				defer wg.Done()
				frames[i] = NewUserSymbols("", nil).FrameAt(Process{PID: os.Getpid()}, ip)
			}()
		}
		wg.Wait()
	})
	if alloc > 16<<20 {
		t.Errorf("three symbolizers of a frame in %s allocated %d MiB, bound 16", path, alloc>>20)
	}
	for _, f := range frames {
		if f.Symbol != "" || f.Module != path {
			t.Errorf("frame %+v, want unsymbolized in %s", f, path)
		}
		want := "symbols not read: .symtab of 505 MiB is over the 256 MiB bound of a symbol table"
		if f.Reason != want {
			t.Errorf("reason %q, want %q", f.Reason, want)
		}
		if s := f.String(); !strings.HasSuffix(s, "[hostile] ("+want+")") {
			t.Errorf("show prints %q", s)
		}
	}

	// The same claim in a file of 8 KiB: past its end.
	short := filepath.Join(dir, "short")
	hostile.write(t, short, false)
	ip = mapExec(t, short) + 16
	f := NewUserSymbols("", nil).FrameAt(Process{PID: os.Getpid()}, ip)
	if f.Symbol != "" || !strings.Contains(f.Reason, ".symtab claims 505 MiB at offset") || !strings.Contains(f.Reason, "past the end of the") {
		t.Errorf("frame %+v, want unsymbolized: past the file's end", f)
	}

	// Under the bound, in the file, but a hole: read in chunks, nothing
	// kept of it, and read once for three symbolizers at once.
	resetShared(t)
	holey := &testELF{funcs: 4, claim: (64 << 20) / elf.Sym64Size * elf.Sym64Size}
	path = filepath.Join(dir, "holey")
	holey.write(t, path, true)
	ip = mapExec(t, path) + 16 + 4
	var us [3]*UserSymbols
	for i := range us {
		us[i] = NewUserSymbols("", nil)
	}
	alloc = heapUse(func() {
		var wg sync.WaitGroup
		for i := range us {
			wg.Add(1)
			go func() {
				defer wg.Done()
				frames[i] = us[i].FrameAt(Process{PID: os.Getpid()}, ip)
			}()
		}
		wg.Wait()
	})
	if alloc > 16<<20 {
		t.Errorf("three symbolizers of a frame in %s (a 64 MiB hole of a table) allocated %d MiB, bound 16", path, alloc>>20)
	}
	readers := 0
	for i, f := range frames {
		if f.Symbol != "fn1" || f.Offset != 4 || f.Reason != "" {
			t.Errorf("frame %+v, want fn1+4", f)
		}
		if budgetRead-us[i].budget.read >= 64<<20 { // the table, not only headers
			readers++
		}
	}
	if readers != 1 {
		t.Errorf("%d symbolizers read %s, want 1 (the others share its symbols)", readers, path)
	}
}

// A corrupt /bin/true (a user's copy) claims a .dynsym of 64 MiB in a
// sparse file of 128 MiB, over a lowered bound: the table is refused.
func TestUserSymbolsBoundedRead(t *testing.T) {
	resetShared(t)
	elfData, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip(err)
	}
	ef, err := elf.NewFile(bytes.NewReader(elfData))
	if err != nil {
		t.Fatal(err)
	}
	idx := -1
	for i, s := range ef.Sections {
		if s.Type == elf.SHT_DYNSYM {
			idx = i
		}
	}
	if idx < 0 || ef.Class != elf.ELFCLASS64 {
		t.Skip("/bin/true has no 64-bit .dynsym")
	}
	shoff := binary.LittleEndian.Uint64(elfData[0x28:])
	binary.LittleEndian.PutUint64(elfData[shoff+uint64(idx)*64+32:], (64<<20)/elf.Sym64Size*elf.Sym64Size)
	path := filepath.Join(t.TempDir(), "huge")
	if err := os.WriteFile(path, elfData, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 128<<20); err != nil {
		t.Fatal(err)
	}
	defer func(old int64) { maxTableBytes = old }(maxTableBytes)
	maxTableBytes = 4 << 20
	var e *elfFile
	alloc := heapUse(func() { e, _ = openELF(path, newSymBudget()) })
	if alloc > 8<<20 {
		t.Errorf("reading %s allocated %d MiB", path, alloc>>20)
	}
	if e == nil || len(e.syms) > 0 || !strings.Contains(e.note, "symbols not read: .dynsym of 63 MiB is over the 4 MiB bound of a symbol table") {
		t.Errorf("a corrupt table: %+v", e)
	}
}

// The bounds of one symbolizer: bytes read, symbols held, and one file's
// symbols. What is over a bound is unsymbolized, with the reason.
func TestSymbolBudgets(t *testing.T) {
	resetShared(t)
	dir := t.TempDir()
	big := &testELF{funcs: 200}
	var paths []string
	for i := 0; i < 6; i++ {
		p := filepath.Join(dir, fmt.Sprint("lib", i))
		big.write(t, p, false)
		paths = append(paths, p)
	}
	// What one file costs to read, and to hold.
	probe := newSymBudget()
	if e, err := openELF(paths[0], probe); err != nil || len(e.syms) != 200 {
		t.Fatalf("%s: %v, %+v", paths[0], err, e)
	}
	read, held := budgetRead-probe.read, budgetHeld-probe.held
	t.Logf("a file of 200 functions: %d bytes read, %d held", read, held)

	// Bytes read: two files' worth and a half.
	resetShared(t)
	defer func(old int64) { budgetRead = old }(budgetRead)
	budgetRead = 2*read + read/2
	u := NewUserSymbols("", nil)
	for i, p := range paths {
		e := u.file(p)
		if e == nil {
			t.Fatalf("%s: not read", p)
		}
		want := ""
		if i >= 2 {
			want = "symbols not read: the " + sizeText(uint64(budgetRead)) + " of symbol tables one command or scrape may read are spent"
		}
		if e.note != want || (want == "") != (len(e.syms) == 200) {
			t.Errorf("file %d: %d symbols, note %q, want note %q", i, len(e.syms), e.note, want)
		}
	}
	// Another symbolizer, on a budget of its own, shares what was read.
	if e := NewUserSymbols("", nil).file(paths[1]); e.note != "" || len(e.syms) != 200 {
		t.Errorf("a new symbolizer: %d symbols, note %q", len(e.syms), e.note)
	}
	budgetRead = 1 << 30

	// Symbols held: three files' worth and a half.
	resetShared(t)
	defer func(old int64) { budgetHeld = old }(budgetHeld)
	budgetHeld = 3*held + held/2
	u = NewUserSymbols("", nil)
	for i, p := range paths {
		e := u.file(p)
		if kept := e.note == ""; kept != (i < 3) {
			t.Errorf("file %d held %v (note %q), want %v", i, kept, e.note, i < 3)
		}
	}
	if e := u.file(paths[0]); e.note != "" {
		t.Errorf("a file held again: note %q", e.note)
	}
	budgetHeld = 64 << 20

	// One file's symbols: 100 of them.
	resetShared(t)
	defer func(old int64) { maxFileSymBytes = old }(maxFileSymBytes)
	maxFileSymBytes = 100 * symCost
	e := NewUserSymbols("", nil).file(paths[0])
	if len(e.syms) != 0 || e.note != "symbols not read: .symtab holds over 4800 bytes of function symbols, the bound of one file" {
		t.Errorf("a file over its bound: %d symbols, note %q", len(e.syms), e.note)
	}
}

// The cache the symbolizers share stays under its bound, the least
// recently used files dropped.
func TestSharedSymbolsBounded(t *testing.T) {
	resetShared(t)
	dir := t.TempDir()
	f := &testELF{funcs: 100}
	var paths []string
	for i := 0; i < 20; i++ {
		p := filepath.Join(dir, fmt.Sprint(i))
		f.write(t, p, false)
		paths = append(paths, p)
	}
	probe := newSymBudget()
	openELF(paths[0], probe)
	cost := budgetHeld - probe.held
	resetShared(t)
	defer func(old int64) { sharedSymBytes = old }(sharedSymBytes)
	sharedSymBytes = 5 * cost
	for i, p := range paths {
		NewUserSymbols("", nil).file(p)
		shared.Lock()
		b, n, l := shared.bytes, len(shared.m), shared.lru.Len()
		shared.Unlock()
		if b > sharedSymBytes || n != l || n != min(i+1, 5) {
			t.Fatalf("after %d files: %d bytes (bound %d), %d entries, %d in order", i+1, b, sharedSymBytes, n, l)
		}
	}
	// The five last read are those kept: read again, they are shared.
	shared.Lock()
	before := maps.Clone(shared.m)
	shared.Unlock()
	u := NewUserSymbols("", nil)
	for _, p := range paths[15:] {
		u.file(p)
	}
	shared.Lock()
	same := maps.Equal(before, shared.m)
	shared.Unlock()
	if !same {
		t.Errorf("the files cached were read again")
	}

	// Files without symbols cost their entries: a user's million files
	// are no more than the bound.
	resetShared(t)
	empty := &testELF{}
	for i := 0; i < 200; i++ {
		p := filepath.Join(dir, fmt.Sprint("empty", i))
		empty.write(t, p, false)
		NewUserSymbols("", nil).file(p)
	}
	shared.Lock()
	n := len(shared.m)
	shared.Unlock()
	if int64(n) > sharedSymBytes/entryCost {
		t.Errorf("%d files without symbols cached, bound %d", n, sharedSymBytes/entryCost)
	}
}

// The bounded reader reads what debug/elf reads: the function symbols of
// the system's files.
func TestTableReaderAgreesWithDebugELF(t *testing.T) {
	resetShared(t)
	files := []string{"/bin/true", "/bin/sh", "/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", os.Args[0]}
	n := 0
	for _, path := range files {
		ef, err := elf.Open(path)
		if err != nil {
			continue
		}
		n++
		var want []string
		for _, get := range []func() ([]elf.Symbol, error){ef.Symbols, ef.DynamicSymbols} {
			list, _ := get()
			for _, s := range list {
				if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && s.Section != elf.SHN_UNDEF && s.Name != "" {
					want = append(want, fmt.Sprintf("%x %d %s", s.Value, s.Size, s.Name))
				}
			}
		}
		ef.Close()
		f, err := bpf.OpenRegular(path)
		if err != nil {
			t.Fatal(err)
		}
		ef, err = newELFFile(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		r := &tableReader{f: f, size: st.Size(), ef: ef, budget: newSymBudget()}
		syms, note := r.readTables()
		f.Close()
		var got []string
		for _, s := range syms {
			got = append(got, fmt.Sprintf("%x %d %s", s.addr, s.size, s.name))
		}
		sort.Strings(want)
		sort.Strings(got)
		t.Logf("%s: %d function symbols", path, len(got))
		if note != "" || strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: %d symbols (note %q), debug/elf reads %d", path, len(got), note, len(want))
		}
	}
	if n == 0 {
		t.Skip("none of the system's files there")
	}
}

// A file whose table of section names claims 500 MB (sparse): debug/elf
// would allocate for the claim before reading; it is refused first, also
// when the file names the table through section 0 (SHN_XINDEX).
func TestHostileSectionNames(t *testing.T) {
	dir := t.TempDir()
	for _, xindex := range []bool{false, true} {
		f := &testELF{funcs: 4}
		b := f.bytes()
		shOff := f.symtabOff - 5*64
		binary.LittleEndian.PutUint64(b[shOff+4*64+32:], 500<<20)
		if xindex {
			binary.LittleEndian.PutUint16(b[62:], uint16(elf.SHN_XINDEX))
			binary.LittleEndian.PutUint32(b[shOff+40:], 4)
		}
		path := filepath.Join(dir, fmt.Sprint("names-", xindex))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(path, 600<<20); err != nil {
			t.Fatal(err)
		}
		var err error
		alloc := heapUse(func() { _, err = openELF(path, newSymBudget()) })
		if err == nil || !strings.Contains(err.Error(), "its section names claim 500 MiB, over the 1 MiB bound") {
			t.Errorf("xindex %v: %v, want the section names refused", xindex, err)
		}
		if alloc > 1<<20 {
			t.Errorf("xindex %v: %d KiB allocated", xindex, alloc>>10)
		}
	}
}
