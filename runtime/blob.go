package runtime

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/bpf/sys"
)

// bpffs holds only BPF objects and directories, so what probectl must find
// again next to its pins (the workspace's identity, each probe's
// description for recovery) is kept in a pinned, frozen array map of one
// element: a little-endian u32 length, then gzipped bytes.

// maxBlob is the most a blob may hold: an array map's value is allocated
// with kmalloc.
const maxBlob = 1 << 20

// gzipWriters are the blob compressors, reused: a new writer allocates and
// clears its compressor state (hundreds of KiB even at BestSpeed), which
// made most of the garbage of an apply of 1,000 probes, one meta blob
// each (issue 22). BestSpeed: blobs are small, and a better ratio saves
// less than it costs.
var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return zw
}}

// pinBlob stores data in a new map pinned as name in d. The map is frozen:
// nothing, not even root through bpf(2), can change it afterwards.
func pinBlob(d *dir, name, mapName string, data []byte) (ebpf.MapID, error) {
	var z bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&z)
	_, _ = zw.Write(data)
	_ = zw.Close()
	gzipWriters.Put(zw)
	if z.Len()+4 > maxBlob {
		return 0, fmt.Errorf("%s: %d bytes, more than a pinned blob holds (%d)", name, z.Len(), maxBlob)
	}
	value := make([]byte, (4+z.Len()+7)&^7)
	binary.LittleEndian.PutUint32(value, uint32(z.Len()))
	copy(value[4:], z.Bytes())
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: mapName, Type: ebpf.Array, KeySize: 4, ValueSize: uint32(len(value)), MaxEntries: 1})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	defer m.Close()
	if err := m.Put(uint32(0), value); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	if err := m.Freeze(); err != nil {
		return 0, fmt.Errorf("%s: freeze: %w", name, err)
	}
	path, err := d.procPath(name)
	if err != nil {
		return 0, err
	}
	if err := m.Pin(path); err != nil {
		return 0, fmt.Errorf("pin %s/%s: %w", d.path, name, err)
	}
	id, err := sys.ObjectID(m.FD())
	if err != nil {
		return 0, fmt.Errorf("pin %s/%s: map info: %w", d.path, name, err)
	}
	return ebpf.MapID(id), nil
}

// isBlob says m has the shape pinBlob gives a blob: an array of one value,
// of 8 to maxBlob bytes.
func isBlob(m *ebpf.Map) bool {
	return m.Type() == ebpf.Array && m.KeySize() == 4 && m.MaxEntries() == 1 && m.ValueSize() >= 8 && m.ValueSize() <= maxBlob
}

// readBlob reads what pinBlob stored as name in d.
func readBlob(d *dir, name string) ([]byte, error) {
	path, err := d.procPath(name)
	if err != nil {
		return nil, err
	}
	m, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("open %s/%s: %w", d.path, name, err)
	}
	defer m.Close()
	if !isBlob(m) {
		return nil, fmt.Errorf("%s/%s is not a probectl blob", d.path, name)
	}
	value := make([]byte, m.ValueSize())
	if err := m.Lookup(uint32(0), &value); err != nil {
		return nil, fmt.Errorf("read %s/%s: %w", d.path, name, err)
	}
	n := binary.LittleEndian.Uint32(value)
	if int(n) > len(value)-4 {
		return nil, fmt.Errorf("%s/%s is damaged", d.path, name)
	}
	zr, err := gzip.NewReader(bytes.NewReader(value[4 : 4+n]))
	if err != nil {
		return nil, fmt.Errorf("%s/%s is damaged: %w", d.path, name, err)
	}
	b, err := io.ReadAll(io.LimitReader(zr, 16*maxBlob))
	if err != nil {
		return nil, fmt.Errorf("%s/%s is damaged: %w", d.path, name, err)
	}
	return b, nil
}
