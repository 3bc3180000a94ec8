package runtime

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// eachEntry reads a per-CPU hash map and a plain one in batches and gives
// exactly what iterating key by key gives: every key once, every CPU's
// value (the one value of a plain map), odd key and value sizes included
// (the per-CPU values are 8-byte aligned, the plain ones packed), in a map
// larger than one batch.
func TestEachEntryBatch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating maps needs root (CAP_BPF)")
	}
	for _, c := range []struct {
		typ                   ebpf.MapType
		keySize, valueSize, n int
	}{
		{ebpf.PerCPUHash, 8, 8, 3 * batchSize / 2},
		{ebpf.PerCPUHash, 13, 16, 1000},
		{ebpf.PerCPUHash, 4, 12, 1},
		{ebpf.PerCPUHash, 8, 8, 0},
		{ebpf.Hash, 8, 8, 3 * batchSize / 2},
		{ebpf.Hash, 13, 12, 1000},
		{ebpf.Hash, 8, 16, 0},
	} {
		t.Run(fmt.Sprintf("%s_key%d_value%d_n%d", c.typ, c.keySize, c.valueSize, c.n), func(t *testing.T) {
			m, err := ebpf.NewMap(&ebpf.MapSpec{Type: c.typ, KeySize: uint32(c.keySize), ValueSize: uint32(c.valueSize), MaxEntries: 2048})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			cpus, err := ebpf.PossibleCPU()
			if err != nil {
				t.Fatal(err)
			}
			if c.typ == ebpf.Hash {
				cpus = 1
			}
			for i := 0; i < c.n; i++ {
				key := make([]byte, c.keySize)
				binary.LittleEndian.PutUint32(key, uint32(i))
				key[c.keySize-1] = byte(i * 7)
				per := make([][]byte, cpus)
				for cpu := range per {
					per[cpu] = make([]byte, c.valueSize)
					for j := range per[cpu] {
						per[cpu][j] = byte(i + cpu*31 + j)
					}
				}
				var value any = per
				if c.typ == ebpf.Hash {
					value = per[0]
				}
				if err := m.Put(key, value); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string]string{}
			var key []byte
			var per [][]byte
			var one []byte
			iter := m.Iterate()
			for c.typ == ebpf.Hash && iter.Next(&key, &one) {
				want[string(key)] = fmt.Sprint([][]byte{one})
			}
			for c.typ != ebpf.Hash && iter.Next(&key, &per) {
				want[string(key)] = fmt.Sprint(per)
			}
			if err := iter.Err(); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			done, err := eachBatch(m, func(key []byte, per [][]byte) {
				if _, dup := got[string(key)]; dup {
					t.Errorf("key %x twice", key)
				}
				got[string(key)] = fmt.Sprint(per)
			})
			if err != nil || !done {
				t.Fatalf("batch lookup: done %v, %v (this kernel has it since 5.6)", done, err)
			}
			if len(got) != c.n || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("batch read %d keys, iteration %d; they differ: %v", len(got), len(want), fmt.Sprint(got) != fmt.Sprint(want))
			}
		})
	}
}
