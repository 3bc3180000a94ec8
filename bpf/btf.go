package bpf

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/cilium/ebpf/btf"
)

// The target's types: the BTF that kernel data is read through (arguments
// by name, struct fields, return types). Facts carry it only as data, the
// raw vmlinux BTF gzipped, in a facts file; the live kernel's is read from
// /sys/kernel/btf/vmlinux. Either is parsed once, when a probe first needs
// it, never when facts are read or compared.

// VmlinuxBTF is where the running kernel exposes its BTF.
const VmlinuxBTF = "/sys/kernel/btf/vmlinux"

// MaxKernelBTF bounds the vmlinux BTF a facts file may carry, uncompressed
// (Debian's is about 6 MB).
const MaxKernelBTF = 64 << 20

// ErrTypesDeferred says the facts have no BTF to give (a built-in profile,
// or a facts file written without it): what needs it is resolved at apply.
var ErrTypesDeferred = errors.New("the target's BTF is not known until apply")

// ErrNoBTF says the target kernel was built without BTF
// (CONFIG_DEBUG_INFO_BTF): no kernel data can be read by name on it.
var ErrNoBTF = errors.New("the kernel has no BTF (CONFIG_DEBUG_INFO_BTF is off)")

// typesCache holds the parsed BTF of one set of facts; copies of the facts
// share it.
type typesCache struct {
	once sync.Once
	spec *btf.Spec
	err  error
}

var typesMu sync.Mutex

// Types returns the target's BTF, parsed on first use: the facts file's,
// or the live kernel's. It returns an error wrapping [ErrTypesDeferred]
// when the facts carry none (a profile), and another error when the target
// has no BTF at all or the carried BTF cannot be read.
func (f *Facts) Types() (*btf.Spec, error) {
	typesMu.Lock()
	if f.types == nil {
		f.types = &typesCache{}
	}
	c := f.types
	typesMu.Unlock()
	c.once.Do(func() { c.spec, c.err = f.loadTypes() })
	return c.spec, c.err
}

// seedTypes gives live facts the kernel's BTF that detection already
// read, so that it is not read again.
func (f *Facts) seedTypes(spec *btf.Spec) {
	c := f.types
	c.once.Do(func() { c.spec = spec })
}

// shareTypes makes the copies of f share the BTF it parses.
func (f *Facts) shareTypes() *Facts {
	f.types = &typesCache{}
	return f
}

func (f *Facts) loadTypes() (*btf.Spec, error) {
	switch {
	case !f.BTF:
		return nil, fmt.Errorf("%s: %w", f.Label(), ErrNoBTF)
	case len(f.KernelBTF) > 0:
		spec, err := parseKernelBTF(f.KernelBTF)
		if err != nil {
			return nil, fmt.Errorf("the BTF of %s: %w", f.Label(), err)
		}
		return spec, nil
	case f.Source == "live" || f.LocalBTF:
		spec, err := KernelBTF()
		if err != nil {
			return nil, fmt.Errorf("the running kernel's BTF: %w", err)
		}
		return spec, nil
	}
	return nil, fmt.Errorf("%s carries no BTF: %w", f.Label(), ErrTypesDeferred)
}

// parseKernelBTF reads gzipped raw BTF, at most MaxKernelBTF bytes of it.
// Whatever the bytes, it returns an error, never panics.
func parseKernelBTF(gz []byte) (spec *btf.Spec, err error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxKernelBTF+1))
	if err != nil {
		return nil, fmt.Errorf("gunzip: %w", err)
	}
	if len(raw) > MaxKernelBTF {
		return nil, fmt.Errorf("larger than %d bytes", MaxKernelBTF)
	}
	defer func() {
		if r := recover(); r != nil {
			spec, err = nil, fmt.Errorf("malformed: %v", r)
		}
	}()
	spec, err = btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("malformed: %w", err)
	}
	// Types decode lazily: decode them all now, so that a damaged one is
	// this error rather than a surprise later.
	for _, err := range spec.All() {
		if err != nil {
			return nil, fmt.Errorf("malformed: %w", err)
		}
	}
	return spec, nil
}

// SameKernelBTF reports whether gz, BTF as a facts file carries it, is
// the running kernel's: two builds of one version may lay structs out
// differently, and offsets taken from one are wrong on the other.
func SameKernelBTF(gz []byte) (bool, error) {
	live, err := ReadRegular(VmlinuxBTF, MaxKernelBTF)
	if err != nil {
		return false, fmt.Errorf("read kernel BTF: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return false, fmt.Errorf("the carried BTF is not gzip: %w", err)
	}
	carried, err := io.ReadAll(io.LimitReader(zr, MaxKernelBTF+1))
	if err != nil {
		return false, fmt.Errorf("the carried BTF: %w", err)
	}
	return bytes.Equal(live, carried), nil
}

// ReadKernelBTF reads the running kernel's raw vmlinux BTF and returns it
// gzipped, as facts files carry it.
func ReadKernelBTF() ([]byte, error) {
	raw, err := ReadRegular(VmlinuxBTF, MaxKernelBTF)
	if err != nil {
		return nil, fmt.Errorf("read kernel BTF: %w", err)
	}
	return GzipBTF(raw)
}

// GzipBTF compresses raw BTF the way facts files carry it.
func GzipBTF(raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
