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
// CPU, counting the CPU clock (a kernel timer) or the hardware's CPU
// cycles, whose overflow runs the probe's program.

// Sampling events.
const (
	EventCPUClock = "cpu-clock"
	EventCycles   = "cycles"
)

// Sampler says what a profile probe samples on every CPU: Event, and
// either Frequency (Hz) or PeriodNS.
type Sampler struct {
	Event     string `json:"event"`
	Frequency int64  `json:"frequency,omitempty"`
	PeriodNS  int64  `json:"period_ns,omitempty"`
}

// attr is the perf_event_attr of the sampler.
func (s Sampler) attr() unix.PerfEventAttr {
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}
	attr.Size = uint32(unsafe.Sizeof(attr))
	if s.Event == EventCycles {
		attr.Type, attr.Config = unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES
	}
	if s.Frequency > 0 {
		attr.Bits |= unix.PerfBitFreq
		attr.Sample = uint64(s.Frequency)
	} else {
		attr.Sample = uint64(s.PeriodNS)
	}
	return attr
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
