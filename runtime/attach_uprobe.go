package runtime

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/bpf/sys"
	"github.com/probectl/probectl/compiler/compiled"
	"golang.org/x/sys/unix"
)

// executable opens the probe's binary once, without blocking, and attaches
// through that descriptor (/proc/self/fd/N): the symbols are read from, and
// the kernel puts the uprobes on, the very file that was checked, whatever
// happens to the path meanwhile (a FIFO swapped in, a new build moved into
// place). The caller closes the file when the links are made.
func (l *linker) executable() (*link.Executable, *os.File, *FileID, error) {
	f, id, err := openBinary(l.p.Root, l.p.Binary)
	if err != nil {
		return nil, nil, nil, l.fail("", err)
	}
	ex, err := link.OpenExecutable(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	if err != nil {
		f.Close()
		return nil, nil, nil, l.fail("", err)
	}
	return ex, f, id, nil
}

func (l *linker) uprobeMulti() error {
	ex, f, id, err := l.executable()
	if err != nil {
		return err
	}
	defer f.Close()
	if l.p.USDT != "" {
		return l.usdtMulti(ex, id)
	}
	ret := l.prog.Family == compiled.FamilyUretprobeMulti
	mk := func(fns []string, cookies []uint64) func(*ebpf.Program) (link.Link, error) {
		return func(pr *ebpf.Program) (link.Link, error) {
			opts := &link.UprobeMultiOptions{Cookies: cookies, PID: uint32(l.p.PID)}
			if ret {
				return ex.UretprobeMulti(fns, pr, opts)
			}
			return ex.UprobeMulti(fns, pr, opts)
		}
	}
	return l.oneForAll(id, mk)
}

// uprobeSession makes one uprobe.session link for every function of the
// binary, by the raw system call: cilium/ebpf has no API for it.
func (l *linker) uprobeSession() error {
	f, id, err := openBinary(l.p.Root, l.p.Binary)
	if err != nil {
		return l.fail("", err)
	}
	defer f.Close()
	mk := func(fns []string, cookies []uint64) func(*ebpf.Program) (link.Link, error) {
		return func(pr *ebpf.Program) (link.Link, error) {
			offsets, err := sys.UprobeOffsets(f, fns)
			if err != nil {
				return nil, err
			}
			fd, err := sys.UprobeSessionLink(pr.FD(), fmt.Sprintf("/proc/self/fd/%d", f.Fd()), offsets, cookies, uint32(l.p.PID))
			if err != nil {
				return nil, err
			}
			return link.NewFromFD(fd)
		}
	}
	return l.oneForAll(id, mk)
}

// multiLink makes a link for the given functions with their cookies.
type multiLink func(fns []string, cookies []uint64) func(*ebpf.Program) (link.Link, error)

// oneForAll makes one link for every function of the binary. The kernel
// does not say which function it refused: find it by trying each alone.
func (l *linker) oneForAll(id *FileID, mk multiLink) error {
	err := l.one("", id, mk(l.p.Functions, l.cookies()))
	if err == nil {
		return nil
	}
	if fn := l.culprit(mk); fn != "" {
		var ae *AttachError
		if errors.As(err, &ae) {
			ae.Function = fn
		}
	}
	return err
}

// culprit returns the first function that cannot be attached on its own.
func (l *linker) culprit(mk multiLink) string {
	if len(l.p.Functions) < 2 {
		return ""
	}
	pr := l.coll.Programs[compiled.ProgramKey(l.prog, "")]
	for i, fn := range l.p.Functions {
		lk, err := mk([]string{fn}, []uint64{uint64(i)})(pr)
		if err != nil {
			return fn
		}
		_ = lk.Close()
	}
	return ""
}

func (l *linker) uprobe() error {
	ex, f, id, err := l.executable()
	if err != nil {
		return err
	}
	defer f.Close()
	if l.p.USDT != "" {
		return l.usdt(ex, id)
	}
	ret := l.prog.Family == compiled.FamilyUretprobe
	cookie := cookieOf(l.prog)
	for i, fn := range l.p.Functions {
		if err := l.one(fn, id, func(pr *ebpf.Program) (link.Link, error) {
			opts := &link.UprobeOptions{Cookie: cookie(i), PID: l.p.PID}
			if ret {
				return ex.Uretprobe(fn, pr, opts)
			}
			return ex.Uprobe(fn, pr, opts)
		}); err != nil {
			return err
		}
	}
	return nil
}

// usdt makes one uprobe per site of a USDT probe, at the site's file
// offset, with its semaphore's file offset as ref_ctr_offset (the kernel
// raises the semaphore in every process of the binary while the uprobe
// is attached) and the site's index as the cookie.
func (l *linker) usdt(ex *link.Executable, id *FileID) error {
	cookie := cookieOf(l.prog)
	for i, s := range l.p.Sites {
		site := fmt.Sprintf("%s@%#x", l.p.USDT, s.Address)
		if err := l.one(site, id, func(pr *ebpf.Program) (link.Link, error) {
			return ex.Uprobe("", pr, &link.UprobeOptions{Address: s.Offset, RefCtrOffset: s.RefCtrOffset, Cookie: cookie(i), PID: l.p.PID})
		}); err != nil {
			return err
		}
	}
	return nil
}

// usdtMulti makes one uprobe.multi link for every site of a USDT probe:
// the sites' file offsets, their semaphores' as ref_ctr_offsets, their
// indexes as cookies.
func (l *linker) usdtMulti(ex *link.Executable, id *FileID) error {
	opts := &link.UprobeMultiOptions{PID: uint32(l.p.PID)}
	for i, s := range l.p.Sites {
		opts.Addresses = append(opts.Addresses, s.Offset)
		opts.RefCtrOffsets = append(opts.RefCtrOffsets, s.RefCtrOffset)
		opts.Cookies = append(opts.Cookies, uint64(i))
	}
	return l.one("", id, func(pr *ebpf.Program) (link.Link, error) { return ex.UprobeMulti(nil, pr, opts) })
}

// FileID identifies the file a uprobe is attached to. The kernel holds the
// inode, not the path: a binary replaced by rename (a package upgrade)
// leaves the probes on the old file, so a new inode at the path is drift.
type FileID struct {
	Dev     uint64 `json:"dev"`
	Inode   uint64 `json:"inode"`
	Size    int64  `json:"size"`
	BuildID string `json:"build_id,omitempty"`
}

// Same reports whether a and b are the same file.
func (a *FileID) Same(b *FileID) bool {
	return a != nil && b != nil && a.Dev == b.Dev && a.Inode == b.Inode && a.BuildID == b.BuildID
}

func (a *FileID) String() string {
	s := fmt.Sprintf("inode %d", a.Inode)
	if a.BuildID != "" {
		s += ", build-id " + a.BuildID
	}
	return s
}

// fileID identifies the regular file at path, following symlinks as the
// kernel does when it attaches. It never blocks: a FIFO is refused.
func fileID(root, path string) (*FileID, error) {
	f, id, err := openBinary(root, path)
	if err != nil {
		return nil, err
	}
	f.Close()
	return id, nil
}

// openBinary opens a regular file under root (symbols.OpenIn: symlinks
// stay within it; anything else refused) without blocking and
// identifies it.
func openBinary(root, path string) (*os.File, *FileID, error) {
	f, err := symbols.OpenIn(root, path)
	if err != nil {
		return nil, nil, err
	}
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, nil, err
	}
	id := &FileID{Dev: st.Dev, Inode: st.Ino, Size: st.Size}
	if ef, err := elf.NewFile(io.NewSectionReader(f, 0, st.Size)); err == nil {
		id.BuildID = buildID(ef)
	}
	return f, id, nil
}

// buildID returns the GNU build-id note of an ELF file, or "".
func buildID(ef *elf.File) string {
	for _, s := range ef.Sections {
		if s.Type != elf.SHT_NOTE || s.Size > 1<<16 {
			continue
		}
		b, err := s.Data()
		if err != nil {
			continue
		}
		if id := noteBuildID(b, ef.ByteOrder); id != "" {
			return id
		}
	}
	return ""
}

// noteBuildID walks the notes of section data b for the GNU build-id
// (NT_GNU_BUILD_ID), or "": it stops at a note too large or cut short.
func noteBuildID(b []byte, order binary.ByteOrder) string {
	for len(b) >= 12 {
		nameSz, descSz, typ := order.Uint32(b), order.Uint32(b[4:]), order.Uint32(b[8:])
		nameEnd := 12 + (int(nameSz)+3)&^3
		descEnd := nameEnd + (int(descSz)+3)&^3
		if nameSz > 1<<10 || descSz > 1<<10 || descEnd > len(b) {
			return ""
		}
		if typ == 3 && bytes.Equal(bytes.TrimRight(b[12:12+nameSz], "\x00"), []byte("GNU")) { // NT_GNU_BUILD_ID
			return hex.EncodeToString(b[nameEnd : nameEnd+int(descSz)])
		}
		b = b[descEnd:]
	}
	return ""
}
