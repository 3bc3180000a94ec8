package runtime

import (
	"fmt"

	"github.com/cilium/ebpf"
)

// SetFault installs a hook called before every step that changes the
// kernel or the state; an error fails that step. Tests only.
func (w *Workspace) SetFault(f func(step string) error) { w.fault = f }

// SetObserver installs a hook told of every kernel object w creates
// ("map", "prog", "link" or "identity", and its ID). Tests only.
func (w *Workspace) SetObserver(f func(kind string, id uint32)) { w.observe = f }

// Locked reports whether w holds its lock.
func (w *Workspace) Locked() bool { return w.locked }

// RemovePins removes the workspace's pin directory (its identity
// included). w must be locked. Tests only.
func (w *Workspace) RemovePins() error {
	root, err := openPath(PinRoot, false)
	if err != nil {
		return err
	}
	defer root.close()
	return root.removeAll(w.Name)
}

// IdentityID is the map ID of the workspace's identity, 0 when it has none.
func (w *Workspace) IdentityID() uint32 {
	pins := w.pins
	if pins == nil {
		var err error
		if pins, err = openPins(w.Name, false); err != nil || pins == nil {
			return 0
		}
		defer pins.close()
	}
	path, err := pins.procPath(identityPin)
	if err != nil {
		return 0
	}
	m, err := ebpf.LoadPinnedMap(path, &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return 0
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		return 0
	}
	id, _ := info.ID()
	return uint32(id)
}

// Objects lists the kernel objects of a session as "kind id". Tests only.
func (s *Session) Objects() []string {
	var out []string
	for _, l := range s.probes {
		for _, a := range l.links {
			if info, err := a.link.Info(); err == nil {
				out = append(out, fmt.Sprintf("link %d", info.ID), fmt.Sprintf("prog %d", info.Program))
			}
		}
		for _, m := range l.coll.Maps {
			if info, err := m.Info(); err == nil {
				id, _ := info.ID()
				out = append(out, fmt.Sprintf("map %d", id))
			}
		}
	}
	if s.buffer != nil {
		if info, err := s.buffer.m.Info(); err == nil {
			id, _ := info.ID()
			out = append(out, fmt.Sprintf("map %d", id))
		}
	}
	return out
}
