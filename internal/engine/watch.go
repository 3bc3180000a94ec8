package engine

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// dirWatch reports changes of the specs' directory: its entries, and,
// when -config is a symlink (git-sync), the link itself, watched in its
// parent, and the directory it resolves to, watched in its own parent
// (that directory renamed away or replaced is a change too).
type dirWatch struct {
	path    string
	w       *fsnotify.Watcher
	watched map[string]bool
	events  chan string
	errors  <-chan error

	mu     sync.Mutex
	target string // the directory path resolved to at the last rewatch
}

func newDirWatch(path string) (*dirWatch, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching %s: %w", path, err)
	}
	d := &dirWatch{path: path, w: fw, watched: map[string]bool{}, events: make(chan string, 1), errors: fw.Errors}
	if err := d.add(filepath.Dir(filepath.Clean(path))); err != nil {
		fw.Close()
		return nil, fmt.Errorf("watching %s: %w", filepath.Dir(path), err)
	}
	d.rewatch(nil)
	go d.forward()
	return d, nil
}

func (d *dirWatch) add(p string) error {
	if d.watched[p] {
		return nil
	}
	if err := d.w.Add(p); err != nil {
		return err
	}
	d.watched[p] = true
	return nil
}

// rewatch watches the directory -config resolves to now (it moves when a
// symlink is swapped, or when the directory is made after the agent
// started) and its parent, and drops the ones it resolved to before.
// While -config resolves to nothing, the last target's parent stays
// watched, to see the directory come back.
func (d *dirWatch) rewatch(log *slog.Logger) {
	parent := filepath.Dir(filepath.Clean(d.path))
	real, err := filepath.EvalSymlinks(d.path)
	d.mu.Lock()
	if err == nil {
		d.target = real
	}
	target := d.target
	d.mu.Unlock()
	keep := map[string]bool{parent: true}
	if target != "" {
		keep[filepath.Dir(target)] = true
	}
	if err == nil {
		keep[real] = true
	}
	for p := range d.watched {
		if !keep[p] {
			d.w.Remove(p)
			delete(d.watched, p)
		}
	}
	if err == nil {
		// Added again each time: the path may name another directory
		// than the one watched (renamed into place), and fsnotify drops
		// its watch of a directory renamed away.
		delete(d.watched, real)
	}
	for p := range keep {
		if err := d.add(p); err != nil && log != nil && p != parent {
			log.Warn("watching the specs' directory", "path", p, "error", err)
		}
	}
}

// forward passes on the events that can change the specs: anything in
// the directory, and in the parents only the entries -config and the
// directory it resolves to are.
func (d *dirWatch) forward() {
	parent := filepath.Dir(filepath.Clean(d.path))
	for ev := range d.w.Events {
		d.mu.Lock()
		target := d.target
		d.mu.Unlock()
		dir := filepath.Dir(ev.Name)
		if (dir == parent || target != "" && dir == filepath.Dir(target)) &&
			ev.Name != filepath.Clean(d.path) && ev.Name != target {
			continue
		}
		select {
		case d.events <- ev.Name:
		default: // one pending change is enough: the read sees them all
		}
	}
	close(d.events)
}

func (d *dirWatch) close() { d.w.Close() }
