package runtime

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cilium/ebpf"
	"github.com/probectl/probectl/compiler/compiled"
	"github.com/probectl/probectl/internal/pods"
)

// The cgroup maps are a probe's hash maps of cgroup ids that its
// programs look the task's cgroup ancestors up in: the tenant map
// (compiled.TenantMapRef), and a pod map per pod predicate of its
// when conditions (compiled.Map.Match). One filler keeps both.

// SetTenantCgroups is SetCgroups with the tenant cgroups ids: the tasks
// of those cgroups, and of every cgroup below them, pass the probes'
// tenant filter; every other task's events are not counted.
func (w *Workspace) SetTenantCgroups(s *State, ids []uint64) (int, error) {
	if ids == nil {
		ids = []uint64{}
	}
	return w.SetCgroups(s, ids)
}

// SetCgroups fills the cgroup maps of every probe of s: a tenant map
// holds exactly tenant (left as it is when tenant is nil: a node-wide
// spec set has none), a pod map the cgroups of the node whose pod
// matches its predicate now (pods.Default names them; off Kubernetes a
// pod is its UID, a container its ID, the namespace ""). The node agent
// calls it after each apply and as the node's pods change; run and serve
// every PodRefresh. It returns how many probes it filled.
func (w *Workspace) SetCgroups(s *State, tenant []uint64) (int, error) {
	if len(tenant) > compiled.TenantMaxCgroups {
		return 0, fmt.Errorf("%d cgroups: a tenant map holds at most %d", len(tenant), compiled.TenantMaxCgroups)
	}
	var node *nodeCgroups
	n := 0
	var errs []error
	for _, p := range s.Probes {
		filled := false
		for _, m := range p.Maps {
			var want map[uint64]bool
			switch {
			case m.Ref == compiled.TenantMapRef && tenant != nil:
				want = setOf(tenant)
			case m.Match != nil:
				if node == nil {
					node = &nodeCgroups{all: pods.Default.Cgroups()}
				}
				want = node.matching(*m.Match)
			default:
				continue
			}
			if err := w.fillPinned(p, m.Ref, want); err != nil {
				errs = append(errs, err)
				continue
			}
			filled = true
		}
		if filled {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// nodeCgroups are the node's cgroups, walked once for a fill.
type nodeCgroups struct{ all []pods.Cgroup }

// matching is the set of cgroups whose pod matches m, at most
// compiled.PodMaxCgroups: for node, the root cgroup (the programs look
// at level 0 only) when this is the node.
func (c *nodeCgroups) matching(m compiled.PodMatch) map[uint64]bool {
	want := map[uint64]bool{}
	for _, cg := range c.all {
		if len(want) >= compiled.PodMaxCgroups {
			break
		}
		var name string
		switch m.Value {
		case "node":
			if !cg.Root {
				continue
			}
			name = pods.NodeName()
		case "pod":
			name = cg.Pod
		case "namespace":
			name = cg.Namespace
		case "container":
			name = cg.Container
		}
		if name == m.Name {
			want[cg.ID] = true
		}
	}
	return want
}

// fillPods fills the pod maps of a probe just loaded, before it is
// attached, so that its first events see the node's pods.
func fillPods(p *compiled.Probe, coll *ebpf.Collection) error {
	var node *nodeCgroups
	for _, m := range p.Maps {
		if m.Match == nil {
			continue
		}
		if node == nil {
			node = &nodeCgroups{all: pods.Default.Cgroups()}
		}
		if err := fillMap(coll.Maps[m.Ref], node.matching(*m.Match)); err != nil {
			return fmt.Errorf("%s: %s map: %w", p.Address, m.Match, err)
		}
	}
	return nil
}

func setOf(ids []uint64) map[uint64]bool {
	want := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	return want
}

// fillPinned makes p's pinned map ref hold the keys of want.
func (w *Workspace) fillPinned(p *ProbeState, ref string, want map[uint64]bool) error {
	m, err := w.openPinned(p, ref, nil)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := fillMap(m, want); err != nil {
		return fmt.Errorf("%s: %s map: %w", p.Address, ref, err)
	}
	return nil
}

// openPinned opens p's pinned map ref.
func (w *Workspace) openPinned(p *ProbeState, ref string, opts *ebpf.LoadPinOptions) (*ebpf.Map, error) {
	d, err := w.probeDir(p)
	if err != nil {
		return nil, err
	}
	defer d.close()
	path, err := d.procPath("map_" + ref)
	if err != nil {
		return nil, err
	}
	m, err := ebpf.LoadPinnedMap(path, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: open the %s map: %w", p.Address, ref, err)
	}
	return m, nil
}

// fillMap makes m hold the keys of want: new ones are added before old
// ones go, so a cgroup in both never misses a lookup.
func fillMap(m *ebpf.Map, want map[uint64]bool) error {
	for id := range want {
		if err := m.Update(id, uint8(1), ebpf.UpdateAny); err != nil {
			return fmt.Errorf("add cgroup %d: %w", id, err)
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
		return err
	}
	for _, id := range stale {
		if err := m.Delete(id); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("remove cgroup %d: %w", id, err)
		}
	}
	return nil
}

// PodRefresh is how often run fills its probes' pod maps again, so that
// a pod's cgroup made after the start is matched.
const PodRefresh = 5 * time.Second

// RefreshPods fills the pod maps of the session's probes from the
// node's cgroups now (as apply did before they were attached).
func (s *Session) RefreshPods() error {
	var errs []error
	for _, l := range s.probes {
		errs = append(errs, fillPods(l.probe, l.coll))
	}
	return errors.Join(errs...)
}

// CgroupMap lists the cgroup ids a probe's cgroup map ref (the tenant
// map, a pod map) holds now, sorted.
func (w *Workspace) CgroupMap(p *ProbeState, ref string) ([]uint64, error) {
	m, err := w.openPinned(p, ref, &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	var ids []uint64
	var key uint64
	var val uint8
	it := m.Iterate()
	for it.Next(&key, &val) {
		ids = append(ids, key)
	}
	slices.Sort(ids)
	return ids, it.Err()
}
