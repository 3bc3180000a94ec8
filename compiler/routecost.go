package compiler

import (
	_ "embed"
	"encoding/json"
	"math"
	"sort"
	"sync"

	"github.com/probectl/probectl/bpf"
)

// The measured cost model: what each kernel link family costs per hit and
// to attach, per kernel of the matrix, as bench/routes measured it in the
// VMs (make routes-table). The compiler reads it for prefer = "hits" |
// "attach" and shows its estimates in the plan. Figures are QEMU TCG
// times: compare families within one kernel, never across kernels or with
// a real machine.

//go:embed routecost.json
var routeCostJSON []byte

// RouteCosts is the table bench/routes writes (compiler/routecost.json).
type RouteCosts struct {
	Note    string       `json:"note"`
	Kernels []KernelCost `json:"kernels"`
}

// KernelCost is one kernel's measurements.
type KernelCost struct {
	// Kernel is the matrix's name ("linux-7.2-amd64").
	Kernel  string      `json:"kernel"`
	Release string      `json:"release"` // uname -r in the VM
	Arch    bpf.Arch    `json:"arch"`
	Version bpf.Version `json:"version"`
	// HitFunction is the kernel function the per-hit figures probe (the
	// getppid system call's); BaselineNS its call from user space with no
	// probe, Calls the calls per round, Rounds the interleaved rounds.
	HitFunction string `json:"hit_function"`
	// HitEvent is the tracepoint the tracepoint families' per-hit figures
	// probe, which the same getppid call fires once.
	HitEvent   string                `json:"hit_event,omitempty"`
	BaselineNS float64               `json:"baseline_ns"`
	Calls      int                   `json:"calls"`
	Rounds     int                   `json:"rounds"`
	Families   map[Family]FamilyCost `json:"families"`
}

// FamilyCost is one link family on one kernel.
type FamilyCost struct {
	// HitNS is the median over interleaved rounds of the added time per
	// call with a trivial program attached (the round's probed time less
	// its baseline, each the fastest of its bursts of 1,000 calls);
	// HitMinNS and HitMaxNS the spread over the rounds.
	HitNS    float64 `json:"hit_ns"`
	HitMinNS float64 `json:"hit_min_ns"`
	HitMaxNS float64 `json:"hit_max_ns"`
	// Attach: the time to create the links for N functions and close
	// them again, by N (1, 10, 100, 1000).
	Attach []AttachCost `json:"attach"`
}

// AttachCost is the attach + detach time of one family for Functions
// functions: the median of Rounds rounds, or (Extrapolated) scaled
// linearly from the largest N measured when measuring took too long.
type AttachCost struct {
	Functions    int     `json:"functions"`
	MS           float64 `json:"ms"`
	Rounds       int     `json:"rounds,omitempty"`
	Extrapolated bool    `json:"extrapolated,omitempty"`
}

// routeCosts decodes the embedded table when first needed: only kernel
// routes (the choice of a family, the plan's estimate) read it, and
// decoding it took a millisecond of every command's start-up when it ran
// at package init.
var routeCosts = sync.OnceValue(func() *RouteCosts {
	var t RouteCosts
	if err := json.Unmarshal(routeCostJSON, &t); err != nil {
		panic("compiler/routecost.json: " + err.Error())
	}
	return &t
})

// RouteCostTable returns the embedded table.
func RouteCostTable() RouteCosts { return *routeCosts() }

// costsFor finds the measurements for f's kernel: the same version and
// arch, else the nearest measured version of the arch (nearest says so).
func costsFor(f *bpf.Facts) (k *KernelCost, nearest bool) {
	best, bestD := -1, math.MaxInt
	t := routeCosts()
	for i := range t.Kernels {
		c := &t.Kernels[i]
		if c.Arch != f.Arch {
			continue
		}
		d := abs(c.Version.Major*1000 + c.Version.Minor - (f.Kernel.Major*1000 + f.Kernel.Minor))
		if d < bestD {
			best, bestD = i, d
		}
	}
	if best < 0 {
		return nil, false
	}
	return &t.Kernels[best], bestD != 0
}

// attachMS estimates the attach + detach time of fam for n functions:
// linear between the measured sizes, and beyond the largest along the
// line through the two largest. ok is false when fam was not measured.
func (k *KernelCost) attachMS(fam Family, n int) (float64, bool) {
	fc, ok := k.Families[fam]
	if !ok || len(fc.Attach) == 0 {
		return 0, false
	}
	pts := append([]AttachCost(nil), fc.Attach...)
	sort.Slice(pts, func(i, j int) bool { return pts[i].Functions < pts[j].Functions })
	if n <= pts[0].Functions || len(pts) == 1 {
		return pts[0].MS * math.Max(1, float64(n)/float64(pts[0].Functions)), true
	}
	i := sort.Search(len(pts), func(i int) bool { return pts[i].Functions >= n })
	if i == len(pts) {
		i = len(pts) - 1
	}
	a, b := pts[i-1], pts[i]
	slope := (b.MS - a.MS) / float64(b.Functions-a.Functions)
	return math.Max(0, a.MS+slope*float64(n-a.Functions)), true
}

// hitNS is fam's added cost per hit; ok is false when it was not measured.
func (k *KernelCost) hitNS(fam Family) (float64, bool) {
	fc, ok := k.Families[fam]
	if !ok || len(fc.Attach) == 0 && fc.HitNS == 0 {
		return 0, false
	}
	return math.Max(fc.HitNS, 0), true
}

// hitUnit is the unit of the cost classes: the lowest per-hit cost of
// one family on k, but at least a tenth of the unprobed call (below that
// the measurement is noise).
func (k *KernelCost) hitUnit() float64 {
	low := math.Inf(1)
	for _, fc := range k.Families {
		low = math.Min(low, fc.HitNS)
	}
	return math.Max(low, math.Max(k.BaselineNS/10, 1))
}

// estimate prices fams for n functions on k; ok is false when a family
// was not measured there.
func (k *KernelCost) estimate(fams []Family, n int) (Estimate, bool) {
	e := Estimate{Kernel: k.Kernel, Functions: n}
	for _, fam := range fams {
		a, ok := k.attachMS(fam, max(n, 1))
		h, ok2 := k.hitNS(fam)
		if !ok || !ok2 {
			return Estimate{}, false
		}
		e.AttachMS += a
		e.HitNS += h
	}
	e.AttachMS = math.Round(e.AttachMS*10) / 10
	e.HitNS = math.Round(e.HitNS)
	switch r := e.HitNS / k.hitUnit(); {
	case r <= 3:
		e.HitClass = "low"
	case r <= 7:
		e.HitClass = "medium"
	default:
		e.HitClass = "high"
	}
	return e, true
}
