package symbols

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
)

// USDT is one statically defined tracing point of a binary: an
// NT_STAPSDT note of its .note.stapsdt section, as sys/sdt.h writes it
// (systemtap's "UST_static_markers", bpftrace's usdt:, libbpf's usdt.c).
type USDT struct {
	Provider, Name string
	// Addr is the probe's virtual address (the note's pc, moved by
	// .stapsdt.base when the file was prelinked); Offset is the file
	// offset of that address, where a uprobe goes.
	Addr, Offset uint64
	// Semaphore is the virtual address of the probe's semaphore (a
	// 16-bit counter the program tests before it evaluates the probe's
	// arguments), 0 without one; SemaphoreOffset is its file offset, the
	// uprobe's ref_ctr_offset: the kernel adds one to the counter of each
	// process while the uprobe is attached.
	Semaphore, SemaphoreOffset uint64
	// Args is the argument specifiers as written, separated by spaces
	// ("-4@%edi 8@-8(%rbp)"); bpf.ParseUSDTArgs reads them.
	Args string
}

// Key is the probe's name as specs and bpftrace write it:
// "provider:name".
func (u USDT) Key() string { return u.Provider + ":" + u.Name }

// maxNotes bounds the .note.stapsdt section read: large programs have a
// few thousand probes of under 100 bytes each.
const maxNotes = 16 << 20

// ntStapsdt is the note type of a USDT probe (owner "stapsdt").
const ntStapsdt = 3

// Notes reads the USDT probes of the ELF file at path (on the host), in
// the order the file lists them; nil for a file without any.
func Notes(path string) ([]USDT, error) {
	f, err := OpenIn("", path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	us, err := ReadNotes(ef)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return us, nil
}

// ReadNotes reads the USDT probes of an ELF file. A note cut short or
// whose sizes run past its section, an address no loaded segment holds,
// or text that is not NUL-terminated is an error naming the note.
func ReadNotes(ef *elf.File) ([]USDT, error) {
	sec := ef.Section(".note.stapsdt")
	if sec == nil {
		return nil, nil
	}
	if sec.Type != elf.SHT_NOTE {
		return nil, fmt.Errorf(".note.stapsdt is not a note section (%s)", sec.Type)
	}
	if sec.Size > maxNotes {
		return nil, fmt.Errorf(".note.stapsdt holds %d bytes, more than the %d read", sec.Size, maxNotes)
	}
	data, err := io.ReadAll(io.LimitReader(sec.Open(), maxNotes))
	if err != nil {
		return nil, fmt.Errorf(".note.stapsdt: %w", err)
	}
	if uint64(len(data)) != sec.Size {
		return nil, fmt.Errorf(".note.stapsdt: %d of its %d bytes are in the file", len(data), sec.Size)
	}
	var base uint64 // .stapsdt.base's address; 0 without one
	if b := ef.Section(".stapsdt.base"); b != nil {
		base = b.Addr
	}
	r := noteReader{ef: ef, data: data, base: base, addrSize: 8}
	if ef.Class == elf.ELFCLASS32 {
		r.addrSize = 4
	}
	return r.all()
}

// noteReader walks the notes of a .note.stapsdt section.
type noteReader struct {
	ef       *elf.File
	data     []byte
	base     uint64
	addrSize int
}

func (r noteReader) all() ([]USDT, error) {
	var out []USDT
	order := r.ef.ByteOrder
	for off := 0; off < len(r.data); {
		b := r.data[off:]
		if len(b) < 12 {
			return nil, fmt.Errorf("note at offset %d: %d bytes, shorter than a note header", off, len(b))
		}
		nameSz, descSz, typ := uint64(order.Uint32(b)), uint64(order.Uint32(b[4:])), order.Uint32(b[8:])
		nameEnd := 12 + align4(nameSz)
		descEnd := nameEnd + align4(descSz)
		if descEnd > uint64(len(b)) {
			return nil, fmt.Errorf("note at offset %d: its sizes (name %d, description %d bytes) run past the section's end", off, nameSz, descSz)
		}
		name := bytes.TrimRight(b[12:12+nameSz], "\x00")
		if typ == ntStapsdt && string(name) == "stapsdt" {
			u, err := r.probe(b[nameEnd : nameEnd+descSz])
			if err != nil {
				return nil, fmt.Errorf("note at offset %d: %w", off, err)
			}
			out = append(out, u)
		}
		off += int(descEnd)
	}
	return out, nil
}

func align4(n uint64) uint64 { return (n + 3) &^ 3 }

// probe decodes a note's description: pc, base, semaphore (one address
// each), then provider, name and arguments, each NUL-terminated.
func (r noteReader) probe(desc []byte) (USDT, error) {
	n := r.addrSize
	if len(desc) < 3*n {
		return USDT{}, fmt.Errorf("description of %d bytes, shorter than its three addresses", len(desc))
	}
	addr := func(i int) uint64 {
		if n == 4 {
			return uint64(r.ef.ByteOrder.Uint32(desc[i*n:]))
		}
		return r.ef.ByteOrder.Uint64(desc[i*n:])
	}
	u := USDT{Addr: addr(0), Semaphore: addr(2)}
	if noteBase := addr(1); r.base != 0 && noteBase != 0 {
		// Prelinked: the file moved, and .stapsdt.base with it.
		u.Addr += r.base - noteBase
	}
	var texts [3]string
	rest := desc[3*n:]
	for i := range texts {
		end := bytes.IndexByte(rest, 0)
		if end < 0 {
			return USDT{}, errors.New("provider, name and arguments are not NUL-terminated")
		}
		texts[i], rest = string(rest[:end]), rest[end+1:]
	}
	u.Provider, u.Name, u.Args = texts[0], texts[1], texts[2]
	if u.Provider == "" || u.Name == "" {
		return USDT{}, fmt.Errorf("a probe with no provider or name (%q:%q)", u.Provider, u.Name)
	}
	var err error
	if u.Offset, err = r.fileOffset(u.Addr, true); err != nil {
		return USDT{}, fmt.Errorf("%s: %w", u.Key(), err)
	}
	if u.Semaphore != 0 {
		if u.SemaphoreOffset, err = r.fileOffset(u.Semaphore, false); err != nil {
			return USDT{}, fmt.Errorf("%s: semaphore: %w", u.Key(), err)
		}
	}
	return u, nil
}

// fileOffset turns a virtual address into the offset in the file of the
// loaded segment that holds it (an executable one, for code).
func (r noteReader) fileOffset(addr uint64, code bool) (uint64, error) {
	for _, p := range r.ef.Progs {
		if p.Type != elf.PT_LOAD || code && p.Flags&elf.PF_X == 0 {
			continue
		}
		if addr >= p.Vaddr && addr-p.Vaddr < p.Filesz {
			return addr - p.Vaddr + p.Off, nil
		}
	}
	what := "loaded segment"
	if code {
		what = "executable segment"
	}
	return 0, fmt.Errorf("address %#x is in no %s of the file", addr, what)
}
