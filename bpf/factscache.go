package bpf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// FactsCachePath is where [Detect] keeps what it detected of the running
// kernel, for the next process of the same boot: /run is emptied at each
// boot, and an entry is used only when the boot id and the kernel release
// it was written for are the running ones, and this very executable wrote
// it. The file holds one entry per executable, the newest first, at most
// [maxCachedFacts] (an agent and a CLI of another build, or the test
// binaries of a build, would otherwise evict each other's at every start).
// PROBECTL_FACTS_CACHE names another path; "off" turns the cache off.
func FactsCachePath() string {
	switch p := os.Getenv("PROBECTL_FACTS_CACHE"); p {
	case "":
		return "/run/probectl/facts.json"
	case "off":
		return ""
	default:
		return p
	}
}

// factsCacheVersion changes whenever what Detect caches changes meaning.
const factsCacheVersion = 4

// maxCachedFacts bounds the entries of the cache file.
const maxCachedFacts = 8

type cachedFacts struct {
	Version int    `json:"version"`
	BootID  string `json:"boot_id"`
	Release string `json:"release"`
	// Binary identifies the probectl executable that detected the facts
	// ([executableID]): another build (an upgrade in the same boot) may
	// detect more, or differently, than the one that wrote the cache, and
	// would read the facts it adds as false.
	Binary string `json:"binary"`
	Facts  *Facts `json:"facts"`
}

// executableID identifies the running executable's file: device, inode,
// size and modification time, "" when unknown. A build installed over
// another is another file.
func executableID() string {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d:%d:%d.%09d", st.Dev, st.Ino, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// readCacheFile returns the entries of the cache file at path, nil when
// there is none to trust. The file is trusted only as root's: a regular
// file (never through a symlink) owned by root and writable by no one
// else, in a directory likewise, since facts decide the programs root
// loads.
func readCacheFile(path string) []cachedFacts {
	if !rootOnly(filepath.Dir(path), true) {
		return nil
	}
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer fd.Close()
	if st, err := fd.Stat(); err != nil || !st.Mode().IsRegular() || !ownedByRoot(st) {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(fd, 1<<20))
	if err != nil {
		return nil
	}
	var entries []cachedFacts
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if dec.Decode(&entries) != nil || len(entries) > maxCachedFacts {
		return nil
	}
	return entries
}

// readCachedFacts returns the cached facts of this boot, release and
// executable, or nil.
func readCachedFacts(release string) *Facts {
	path := FactsCachePath()
	boot, exe := bootID(), executableID()
	if path == "" || boot == "" || exe == "" {
		return nil
	}
	for _, c := range readCacheFile(path) {
		if c.Version != factsCacheVersion || c.BootID != boot || c.Release != release || c.Binary != exe || c.Facts == nil {
			continue
		}
		f := c.Facts
		if f.Source != "live" || f.Release != release || f.Arch != ArchX86_64 && f.Arch != ArchArm64 {
			return nil
		}
		return f.shareTypes()
	}
	return nil
}

// writeCachedFacts keeps f for the next process of this boot, in front of
// the other executables' entries of this boot. Failing to is not an
// error: the next process detects again. Two processes writing at once
// may lose one's entry: it is a cache.
func writeCachedFacts(f *Facts) {
	path := FactsCachePath()
	boot, exe := bootID(), executableID()
	if path == "" || boot == "" || exe == "" {
		return
	}
	dir := filepath.Dir(path)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return
	}
	if !rootOnly(dir, true) {
		return
	}
	b, err := json.Marshal(cacheEntries(f, path, boot, exe))
	if err != nil {
		return
	}
	replaceFile(dir, path, b)
}

// cacheEntries are the entries of the cache file at path once f, the
// facts of executable exe in boot, is kept: f without what is read anew
// each time, then the other executables' entries of this boot.
func cacheEntries(f *Facts, path, boot, exe string) []cachedFacts {
	c := *f
	c.Functions, c.Events, c.Tracepoints, c.TracepointFormats, c.KernelBTF = nil, nil, nil, nil, nil
	c.CPUs = 0
	entries := []cachedFacts{{Version: factsCacheVersion, BootID: boot, Release: f.Release, Binary: exe, Facts: &c}}
	for _, old := range readCacheFile(path) {
		if old.Version == factsCacheVersion && old.BootID == boot && old.Binary != exe && len(entries) < maxCachedFacts {
			entries = append(entries, old)
		}
	}
	return entries
}

// replaceFile replaces the file at path, in dir, with b (mode 0644) by
// renaming a temporary file over it; on any failure it leaves path as it
// was.
func replaceFile(dir, path string, b []byte) {
	tmp, err := os.CreateTemp(dir, ".facts-*")
	if err != nil {
		return
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil || tmp.Chmod(0o644) != nil || tmp.Close() != nil {
		tmp.Close()
		return
	}
	os.Rename(tmp.Name(), path)
}

// rootOnly reports whether path is owned by root and writable by no one
// else (a directory, when dir).
func rootOnly(path string, dir bool) bool {
	st, err := os.Lstat(path)
	if err != nil || st.IsDir() != dir || st.Mode()&os.ModeSymlink != 0 {
		return false
	}
	return ownedByRoot(st)
}

func ownedByRoot(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && sys.Uid == 0 && st.Mode().Perm()&0o022 == 0
}
