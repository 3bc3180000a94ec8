package engine

import (
	"fmt"
	"strings"
	"time"
)

// unsettledWarn is how long, in debounces, the agent waits on specs that
// do not settle before it warns (once per change) that the previous
// probes stay live.
const unsettledWarn = 10

// pendingSpecs is the change the agent waits on.
type pendingSpecs struct {
	since  time.Time // when the wait began
	seen   time.Time // when the specs were last read with this digest first
	digest string    // "" while a file is written
	warned bool
}

// stable tells whether set may be applied: no process holds one of its
// files open for writing, and either a read at least a debounce ago found
// the same specs (the wait on a change), or the read is one to apply at
// once: force (start, SIGHUP) or a symlinked -config swapped to another
// directory (git-sync writes the whole revision before the swap). Else it
// says why not.
func stable(set *specSet, live *Applied, pend *pendingSpecs, force bool, now time.Time, settle time.Duration) (bool, string) {
	switch {
	case len(set.writing) > 0:
		return false, fmt.Sprintf("%s: %v; the agent applies it once it is closed and unchanged for -debounce", strings.Join(set.writing, ", "), errBeingWritten)
	case force || live != nil && set.real != live.real:
		return true, ""
	case pend != nil && pend.digest == set.digest && now.Sub(pend.seen) >= settle:
		return true, ""
	}
	return false, fmt.Sprintf("the specs changed within the last %s (-debounce); the agent applies them once unchanged for that long", settle)
}

// wait records that the agent waits on set: why, in /status, and in the
// log when the wait begins and once it is long.
func (a *DirAgent) wait(set *specSet, why string, now time.Time) {
	digest := set.digest
	if len(set.writing) > 0 {
		digest = ""
	}
	p := a.pend
	if p == nil {
		p = &pendingSpecs{since: now}
		a.pend = p
		a.log.Info("waiting for the specs to settle; the previous probes stay live", "why", why)
	}
	if p.digest != digest || digest == "" {
		p.digest, p.seen = digest, now
	}
	if !p.warned && now.Sub(p.since) >= unsettledWarn*a.o.Debounce {
		p.warned = true
		a.log.Warn("the specs have not settled; the previous probes stay live", "since", p.since.UTC(), "why", why)
	}
	a.mu.Lock()
	a.status.Pending = &Pending{Since: p.since.UTC(), Reason: why, Digest: digest}
	a.mu.Unlock()
}

// settled ends a wait.
func (a *DirAgent) settled() {
	a.pend = nil
	a.mu.Lock()
	a.status.Pending = nil
	a.mu.Unlock()
}
