package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// StrayPins lists the workspaces, among those whose name match accepts,
// whose pins under PinRoot are stateDir's (their identity names stateDir
// and the workspace) while stateDir holds no such workspace: pins that no
// command reaches any more (the state directory was lost or emptied by
// hand). Pins of another state directory, or of none known, are never
// listed. No bpffs or no pin root: none.
func StrayPins(stateDir string, accept func(name string) bool) ([]string, error) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, err
	}
	root, err := openPinRoot(false)
	if root == nil || err != nil {
		return nil, err
	}
	defer root.close()
	names, err := root.list()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range names {
		if !isWorkspaceName(name) || !accept(name) {
			continue
		}
		// Pins it cannot read are not known to be stateDir's: skipped.
		if stray, err := strayIn(root, abs, name); err == nil && stray {
			out = append(out, name)
		}
	}
	return out, nil
}

// RemoveStrayPins removes the pins of workspace name when StrayPins lists
// them, checked again under the pins' lock: their links, programs and
// maps go with their last pin. It returns whether it removed them.
func RemoveStrayPins(stateDir, name string) (bool, error) {
	w, err := Open(stateDir, name)
	if err != nil {
		return false, err
	}
	root, err := openPinRoot(false)
	if root == nil || err != nil {
		return false, err
	}
	defer root.close()
	if stray, err := strayIn(root, w.StateDir, name); !stray || err != nil {
		return false, err
	}
	pins, err := root.sub(name, false, trustPrivate)
	if err != nil {
		return false, err
	}
	defer pins.close()
	if err := w.flock(pins); err != nil {
		return false, err
	}
	if stray, err := strayIn(root, w.StateDir, name); !stray || err != nil {
		return false, err
	}
	return true, root.removeAll(name)
}

// strayIn says whether root's pin directory name is stray for the state
// directory abs.
func strayIn(root *dir, abs, name string) (bool, error) {
	pins, err := root.sub(name, false, trustPrivate)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	id, err := readIdentity(pins)
	pins.close()
	if err != nil || id == nil || id.StateDir != abs || id.Workspace != name {
		return false, err
	}
	st, err := openPath(abs, false)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("state directory: %w", err)
	}
	defer st.close()
	return !st.exists(name), nil
}
