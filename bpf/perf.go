package bpf

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Perf events, the sampling behind profile probes: one event per online
// CPU, counting the CPU clock (a kernel timer), a software event the
// kernel counts (page faults, context switches...) or one of the
// hardware's counters (cycles, instructions, cache misses...: a PMU's),
// whose overflow runs the probe's program.

// Sampling events.
const (
	EventCPUClock = "cpu-clock"
	EventCycles   = "cycles"
)

// PerfEvent is an event a profile probe samples on: bpftrace's name for
// it (software:NAME, hardware:NAME) and alias, its perf type and config,
// and the period bpftrace samples it at when a probe gives none.
type PerfEvent struct {
	Name, Alias   string
	Hardware      bool   // PERF_TYPE_HARDWARE: needs the machine's PMU
	Config        uint64 // PERF_COUNT_SW_* or PERF_COUNT_HW_*
	DefaultPeriod int64
	// Clock: the event counts nanoseconds (cpu-clock, task-clock), so
	// its period is a time (period_ns); the others count occurrences.
	Clock bool
}

// PerfEvents are bpftrace's software and hardware events, as its probe
// matcher lists them, with its default periods.
var PerfEvents = []PerfEvent{
	{Name: "alignment-faults", Config: unix.PERF_COUNT_SW_ALIGNMENT_FAULTS, DefaultPeriod: 1},
	{Name: "bpf-output", Config: unix.PERF_COUNT_SW_BPF_OUTPUT, DefaultPeriod: 1},
	{Name: "context-switches", Alias: "cs", Config: unix.PERF_COUNT_SW_CONTEXT_SWITCHES, DefaultPeriod: 1000},
	{Name: "cpu-clock", Alias: "cpu", Config: unix.PERF_COUNT_SW_CPU_CLOCK, DefaultPeriod: 1000000, Clock: true},
	{Name: "cpu-migrations", Config: unix.PERF_COUNT_SW_CPU_MIGRATIONS, DefaultPeriod: 1},
	{Name: "dummy", Config: unix.PERF_COUNT_SW_DUMMY, DefaultPeriod: 1},
	{Name: "emulation-faults", Config: unix.PERF_COUNT_SW_EMULATION_FAULTS, DefaultPeriod: 1},
	{Name: "major-faults", Config: unix.PERF_COUNT_SW_PAGE_FAULTS_MAJ, DefaultPeriod: 1},
	{Name: "minor-faults", Config: unix.PERF_COUNT_SW_PAGE_FAULTS_MIN, DefaultPeriod: 100},
	{Name: "page-faults", Alias: "faults", Config: unix.PERF_COUNT_SW_PAGE_FAULTS, DefaultPeriod: 100},
	{Name: "task-clock", Config: unix.PERF_COUNT_SW_TASK_CLOCK, DefaultPeriod: 1, Clock: true},

	{Name: "backend-stalls", Hardware: true, Config: unix.PERF_COUNT_HW_STALLED_CYCLES_BACKEND, DefaultPeriod: 1000000},
	{Name: "branch-instructions", Alias: "branches", Hardware: true, Config: unix.PERF_COUNT_HW_BRANCH_INSTRUCTIONS, DefaultPeriod: 100000},
	{Name: "branch-misses", Hardware: true, Config: unix.PERF_COUNT_HW_BRANCH_MISSES, DefaultPeriod: 100000},
	{Name: "bus-cycles", Hardware: true, Config: unix.PERF_COUNT_HW_BUS_CYCLES, DefaultPeriod: 100000},
	{Name: "cache-misses", Hardware: true, Config: unix.PERF_COUNT_HW_CACHE_MISSES, DefaultPeriod: 1000000},
	{Name: "cache-references", Hardware: true, Config: unix.PERF_COUNT_HW_CACHE_REFERENCES, DefaultPeriod: 1000000},
	{Name: "cpu-cycles", Alias: "cycles", Hardware: true, Config: unix.PERF_COUNT_HW_CPU_CYCLES, DefaultPeriod: 1000000},
	{Name: "frontend-stalls", Hardware: true, Config: unix.PERF_COUNT_HW_STALLED_CYCLES_FRONTEND, DefaultPeriod: 1000000},
	{Name: "instructions", Hardware: true, Config: unix.PERF_COUNT_HW_INSTRUCTIONS, DefaultPeriod: 1000000},
	{Name: "ref-cycles", Hardware: true, Config: unix.PERF_COUNT_HW_REF_CPU_CYCLES, DefaultPeriod: 1000000},
}

// LookupPerfEvent finds an event by its name or its alias.
func LookupPerfEvent(name string) (PerfEvent, bool) {
	for _, e := range PerfEvents {
		if e.Name == name || e.Alias != "" && e.Alias == name {
			return e, true
		}
	}
	return PerfEvent{}, false
}

// Sampler says what a profile probe samples on every CPU (or one): Event, and
// either Frequency (Hz), PeriodNS (a clock event's) or Period (every
// Period occurrences of a counting event).
type Sampler struct {
	Event     string `json:"event"`
	Frequency int64  `json:"frequency,omitempty"`
	PeriodNS  int64  `json:"period_ns,omitempty"`
	Period    int64  `json:"period,omitempty"`
	// OneCPU: the event is opened on the first online CPU only, a timer
	// that fires once per period rather than once per CPU.
	OneCPU bool `json:"one_cpu,omitempty"`
}

// attr is the perf_event_attr of the sampler.
func (s Sampler) attr() unix.PerfEventAttr {
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}
	attr.Size = uint32(unsafe.Sizeof(attr))
	if e, ok := LookupPerfEvent(s.Event); ok {
		attr.Config = e.Config
		if e.Hardware {
			attr.Type = unix.PERF_TYPE_HARDWARE
		}
	}
	switch {
	case s.Frequency > 0:
		attr.Bits |= unix.PerfBitFreq
		attr.Sample = uint64(s.Frequency)
	case s.Period > 0:
		attr.Sample = uint64(s.Period)
	default:
		attr.Sample = uint64(s.PeriodNS)
	}
	return attr
}

// Rate says how often the sampler samples: "at 99 Hz", "every 10000000
// ns", "every 100 events", "at every event".
func (s Sampler) Rate() string {
	switch {
	case s.PeriodNS > 0:
		return fmt.Sprintf("every %d ns", s.PeriodNS)
	case s.Period == 1:
		return "at every event"
	case s.Period > 0:
		return fmt.Sprintf("every %d events", s.Period)
	}
	return fmt.Sprintf("at %d Hz", s.Frequency)
}

// Hardware says whether the sampler's event is a hardware counter.
func (s Sampler) Hardware() bool {
	e, ok := LookupPerfEvent(s.Event)
	return ok && e.Hardware
}

// Open opens the sampler's perf event on one CPU, for every task. The
// caller links a program to it and closes it.
func (s Sampler) Open(cpu int) (*os.File, error) {
	attr := s.attr()
	fd, err := unix.PerfEventOpen(&attr, -1, cpu, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("perf_event_open %s on cpu %d: %w%s", s.Event, cpu, err, s.hint(err))
	}
	return os.NewFile(uintptr(fd), fmt.Sprintf("perf:%s:cpu%d", s.Event, cpu)), nil
}

func (s Sampler) hint(err error) string {
	switch {
	case err == unix.EINVAL && s.Frequency > 0:
		if max, ok := readInt("/proc/sys/kernel/perf_event_max_sample_rate"); ok && s.Frequency > int64(max) {
			return fmt.Sprintf(" (frequency %d is above kernel.perf_event_max_sample_rate, %d: the kernel lowers it when sampling takes too long)", s.Frequency, max)
		}
	case err == unix.ENOENT || err == unix.EOPNOTSUPP:
		if s.Event == EventCycles {
			return " (this machine has no hardware cycle counter that samples: use event = \"cpu-clock\")"
		}
		if s.Hardware() {
			return fmt.Sprintf(" (hardware event %s: this machine has no PMU, a performance monitoring unit, that counts it, as most VMs have none; /sys/bus/event_source/devices lists its PMUs)", s.Event)
		}
	}
	return ""
}

// OnlineCPUs lists the CPUs that are online, from
// /sys/devices/system/cpu/online ("0-3,5").
func OnlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, err
	}
	return ParseCPUList(strings.TrimSpace(string(b)))
}

// ParseCPUList parses a kernel CPU list such as "0-3,5".
func ParseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpu list %q: %q is not a CPU", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > MaxCPUs {
				return nil, fmt.Errorf("cpu list %q: %q is not a range", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("cpu list %q: no CPUs", s)
	}
	return cpus, nil
}

func readInt(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// detectPerf finds out what the live kernel and machine sample with.
func detectPerf(link bool) Perf {
	p := Perf{Link: link}
	if n, ok := readInt("/proc/sys/kernel/perf_event_max_stack"); ok {
		p.MaxStack = n
	}
	cpus, err := OnlineCPUs()
	if err != nil {
		p.CyclesWhy = err.Error()
		return p
	}
	f, err := Sampler{Event: EventCycles, Frequency: 99}.Open(cpus[0])
	if err != nil {
		p.CyclesWhy = fmt.Sprintf("perf_event_open of PERF_COUNT_HW_CPU_CYCLES fails: %v", unwrapErrno(err))
		return p
	}
	f.Close()
	p.Cycles = true
	return p
}

// unwrapErrno returns the errno under err, or err.
func unwrapErrno(err error) error {
	for e := err; e != nil; {
		if n, ok := e.(unix.Errno); ok {
			return n
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return err
}
