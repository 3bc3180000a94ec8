package compiled

import "fmt"

// Estimate is what the table says a route costs for a probe's functions.
type Estimate struct {
	// Kernel is the measured kernel the figures come from; Nearest says
	// that it is not the target's own version.
	Kernel  string `json:"kernel"`
	Nearest bool   `json:"nearest,omitempty"`
	// Functions is the number of functions the estimate is for: the
	// resolved list, or the exact names; with globs the target cannot
	// resolve (Unresolved), an assumed 1,000 (or the exact names, if more).
	Functions  int  `json:"functions"`
	Unresolved bool `json:"unresolved,omitempty"`
	// Events says Functions counts a tracepoint probe's events.
	Events bool `json:"events,omitempty"`
	// AttachMS is the estimated attach + detach time of all the probe's
	// links, HitNS the added time per call of a probed function (entry and
	// exit together), in the measuring VM's time.
	AttachMS float64 `json:"attach_ms"`
	HitNS    float64 `json:"hit_ns"`
	// HitClass is HitNS against the kernel's cheapest family (or a tenth
	// of the unprobed call, if more): "low" (≤ 3×), "medium" (≤ 7×),
	// "high".
	HitClass string `json:"hit_class"`
}

// String renders e for the plan.
func (e *Estimate) String() string {
	noun := "function"
	if e.Events {
		noun = "event"
	}
	n := fmt.Sprintf("%d %ss", e.Functions, noun)
	if e.Functions == 1 {
		n = "1 " + noun
	}
	if e.Unresolved {
		n = "1,000 functions if the globs match that many (they resolve at apply)"
		if e.Functions != 1000 {
			n = fmt.Sprintf("%d functions and what the globs match (they resolve at apply)", e.Functions)
		}
	}
	s := fmt.Sprintf("attach ≈ %s for %s, per hit: %s", MSText(e.AttachMS), n, e.HitClass)
	if e.Nearest {
		s += " (table of " + e.Kernel + ", the nearest measured kernel)"
	}
	return s
}

// MSText writes a time in milliseconds as plans show it: "0.4 ms", "12 ms", "1.5 s".
func MSText(ms float64) string {
	switch {
	case ms >= 10000:
		return fmt.Sprintf("%.0f s", ms/1000)
	case ms >= 1000:
		return fmt.Sprintf("%.1f s", ms/1000)
	case ms >= 10:
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f ms", ms)
}
