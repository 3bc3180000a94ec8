package symbols

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/probectl/probectl/bpf"
	"golang.org/x/sys/unix"
)

// LDCache is the dynamic linker's cache of libraries, as ldconfig writes
// it: what bpftrace and ld.so search for a library given by name.
const LDCache = "/etc/ld.so.cache"

// maxLDCache bounds the cache read (the file is root's; a large system's
// is a few hundred KiB).
const maxLDCache = 16 << 20

// Library flags of ld.so.cache entries (glibc's ldconfig.h).
const (
	ldFlagTypeMask = 0x00ff
	ldFlagELFLibc6 = 0x0003
	ldFlagArchMask = 0xff00
)

// ldArch is the entry flag for a 64-bit library of each architecture.
var ldArch = map[bpf.Arch]uint32{bpf.ArchX86_64: 0x0300, bpf.ArchArm64: 0x0a00}

// ResolveLibrary finds a library of arch by name in the dynamic linker's
// cache at cache: "libc" is the library libc.so or libc.so.N, as bpftrace
// takes uprobe:libc:malloc; a name with ".so" in it ("libssl.so.3") must
// be the cached name exactly. Names that all lead to one file (libfoo.so
// and libfoo.so.1, both links to libfoo.so.1.2) are that one file. It
// returns the path ld.so would load, or an error that says what the cache
// holds.
func ResolveLibrary(cache, name string, arch bpf.Arch) (string, error) {
	f, err := os.Open(cache)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return resolveLibrary(f, cache, "", name, arch)
}

// resolveLibrary resolves name in the cache read from r, named cache in
// messages, whose paths are within root.
func resolveLibrary(r io.Reader, cache, root, name string, arch bpf.Arch) (string, error) {
	entries, err := readLDCache(r, cache)
	if err != nil {
		return "", err
	}
	want, ok := ldArch[arch]
	if !ok {
		return "", fmt.Errorf("no ld.so.cache flags known for %s", arch)
	}
	found := matchLibraries(entries, name, want)
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%s lists no %s library %q (ldconfig -p lists what it holds)", cache, arch, name)
	case 1:
		for _, p := range found {
			return p, nil
		}
	}
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	sort.Strings(names)
	if p, ok := oneFile(root, name, names, found); ok {
		return p, nil
	}
	return "", fmt.Errorf("%q is ambiguous in %s: %s; give one of them", name, cache, strings.Join(names, ", "))
}

// readLDCache reads the entries of the cache file read from r, of at
// most maxLDCache bytes.
func readLDCache(r io.Reader, cache string) ([]ldEntry, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxLDCache+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxLDCache {
		return nil, fmt.Errorf("%s is larger than %d MiB", cache, maxLDCache>>20)
	}
	entries, err := parseLDCache(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cache, err)
	}
	return entries, nil
}

// matchLibraries maps each cached name that name matches, among the
// libc6 entries of arch flag want, to its first path: the cache lists the
// preferred first.
func matchLibraries(entries []ldEntry, name string, want uint32) map[string]string {
	exact := strings.Contains(name, ".so")
	found := map[string]string{}
	for _, e := range entries {
		if e.flags&ldFlagTypeMask != ldFlagELFLibc6 || e.flags&ldFlagArchMask != want {
			continue
		}
		match := e.name == name
		if !exact {
			match = e.name == name+".so" || strings.HasPrefix(e.name, name+".so.")
		}
		if _, seen := found[e.name]; match && !seen {
			found[e.name] = e.path
		}
	}
	return found
}

// oneFile returns the path of the names (sorted) when their paths all
// open, within root, as one file (one device and inode): the versioned
// name's (libfoo.so.1 rather than the development link libfoo.so), as a
// process maps it.
func oneFile(root, name string, names []string, paths map[string]string) (string, bool) {
	var first unix.Stat_t
	for i, n := range names {
		st, err := statIn(root, paths[n])
		if err != nil || i > 0 && (st.Dev != first.Dev || st.Ino != first.Ino) {
			return "", false
		}
		first = st
	}
	for _, n := range names {
		if n != name+".so" {
			return paths[n], true
		}
	}
	return paths[names[0]], true
}

// statIn stats the regular file at path within root, as [OpenIn] opens
// it.
func statIn(root, path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	f, err := OpenIn(root, path)
	if err != nil {
		return st, err
	}
	defer f.Close()
	err = unix.Fstat(int(f.Fd()), &st)
	return st, err
}

type ldEntry struct {
	flags      uint32
	name, path string
}

// The cache formats: glibc's new one (since 2.32 the only one ldconfig
// writes), possibly after the old one.
var (
	ldMagicOld = []byte("ld.so-1.7.0")
	ldMagicNew = []byte("glibc-ld.so.cache1.1")
)

// parseLDCache reads the entries of the new format: a 48-byte header
// (magic and version, nlibs, the string table's length, flags, an
// extension offset, unused words), then nlibs entries of 24 bytes (flags,
// the name's and the path's offsets from the header, the OS version,
// hwcap), then strings. Offsets out of the file are errors.
func parseLDCache(data []byte) ([]ldEntry, error) {
	base := 0
	if bytes.HasPrefix(data, ldMagicOld) {
		if len(data) < 16 {
			return nil, errors.New("truncated")
		}
		n := binary.LittleEndian.Uint32(data[12:16])
		if uint64(n)*12+16 > uint64(len(data)) {
			return nil, errors.New("truncated old-format entries")
		}
		base = (16 + int(n)*12 + 7) &^ 7
	}
	if base > len(data) || !bytes.HasPrefix(data[base:], ldMagicNew) {
		return nil, errors.New("not an ld.so.cache of the glibc-ld.so.cache1.1 format")
	}
	d := data[base:]
	const header, entry = 48, 24
	if len(d) < header {
		return nil, errors.New("truncated header")
	}
	n := binary.LittleEndian.Uint32(d[20:24])
	if uint64(n)*entry+header > uint64(len(d)) {
		return nil, errors.New("truncated entries")
	}
	str := func(off uint32) (string, error) {
		if uint64(off) >= uint64(len(d)) {
			return "", errors.New("a string offset beyond the file")
		}
		s := d[off:]
		i := bytes.IndexByte(s, 0)
		if i < 0 {
			return "", errors.New("an unterminated string")
		}
		return string(s[:i]), nil
	}
	out := make([]ldEntry, 0, n)
	for i := uint32(0); i < n; i++ {
		e := d[header+int(i)*entry:]
		name, err := str(binary.LittleEndian.Uint32(e[4:8]))
		if err != nil {
			return nil, err
		}
		path, err := str(binary.LittleEndian.Uint32(e[8:12]))
		if err != nil {
			return nil, err
		}
		out = append(out, ldEntry{flags: binary.LittleEndian.Uint32(e[0:4]), name: name, path: path})
	}
	return out, nil
}
