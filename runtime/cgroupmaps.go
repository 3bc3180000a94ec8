package runtime

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/compiler/compiled"
)

// SetTenantCgroups makes the tenant map (compiled.TenantMapRef) of every
// probe of s that has one hold exactly the cgroup ids ids: the tasks of
// those cgroups, and of every cgroup below them, pass the probes' tenant
// filter; every other task's events are not counted. The node agent calls
// it after each apply and whenever the namespace's pods on the node
// change. It returns how many probes it filled.
func (w *Workspace) SetTenantCgroups(s *State, ids []uint64) (int, error) {
	if len(ids) > compiled.TenantMaxCgroups {
		return 0, fmt.Errorf("%d cgroups: a tenant map holds at most %d", len(ids), compiled.TenantMaxCgroups)
	}
	want := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	n := 0
	var errs []error
	for _, p := range s.Probes {
		if !hasMap(p, compiled.TenantMapRef) {
			continue
		}
		if err := w.fillTenant(p, want); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func hasMap(p *ProbeState, ref string) bool {
	for _, m := range p.Maps {
		if m.Ref == ref {
			return true
		}
	}
	return false
}

// fillTenant makes p's tenant map hold the keys of want: new ones are
// added before old ones go, so a cgroup in both never fails the filter.
func (w *Workspace) fillTenant(p *ProbeState, want map[uint64]bool) error {
	d, err := w.probeDir(p)
	if err != nil {
		return err
	}
	defer d.close()
	path, err := d.procPath("map_" + compiled.TenantMapRef)
	if err != nil {
		return err
	}
	m, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		return fmt.Errorf("%s: open the tenant map: %w", p.Address, err)
	}
	defer m.Close()
	for id := range want {
		if err := m.Update(id, uint8(1), ebpf.UpdateAny); err != nil {
			return fmt.Errorf("%s: tenant map: add cgroup %d: %w", p.Address, id, err)
		}
	}
	var stale []uint64
	var key uint64
	var val uint8
	it := m.Iterate()
	for it.Next(&key, &val) {
		if !want[key] {
			stale = append(stale, key)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("%s: tenant map: %w", p.Address, err)
	}
	for _, id := range stale {
		if err := m.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("%s: tenant map: remove cgroup %d: %w", p.Address, id, err)
		}
	}
	return nil
}
