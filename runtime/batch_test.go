package runtime

import (
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/cilium/ebpf"
)

// eachEntry reads a per-CPU hash map in batches and gives exactly what
// iterating key by key gives: every key once, every CPU's value, odd key
// and value sizes included (the per-CPU values are 8-byte aligned), in a
// map larger than one batch.
func TestEachEntryBatch(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating maps needs root (CAP_BPF)")
	}
	for _, c := range []struct{ keySize, valueSize, keys int }{
		{8, 8, 3 * batchSize / 2},
		{13, 16, 1000},
		{4, 12, 1},
		{8, 8, 0},
	} {
		t.Run(fmt.Sprintf("key%d_value%d_n%d", c.keySize, c.valueSize, c.keys), func(t *testing.T) {
			m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUHash, KeySize: uint32(c.keySize), ValueSize: uint32(c.valueSize), MaxEntries: 2048})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			cpus, err := ebpf.PossibleCPU()
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < c.keys; i++ {
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
				if err := m.Put(key, per); err != nil {
					t.Fatal(err)
				}
			}
			want := map[string]string{}
			var key []byte
			var per [][]byte
			iter := m.Iterate()
			for iter.Next(&key, &per) {
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
			if len(got) != c.keys || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("batch read %d keys, iteration %d; they differ: %v", len(got), len(want), fmt.Sprint(got) != fmt.Sprint(want))
			}
		})
	}
}
