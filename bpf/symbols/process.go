package symbols

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/probectl/probectl/bpf"
)

// Processes by more than their pid: a pid is another process's as soon as
// the one that had it exits (and a user can get a given pid back in
// seconds), so a program records beside a user address the process's
// start time too, and symbols are read through /proc only while the
// process there is the one that started then.

// ProcessStarted marks the high half of a process slot (a ustack or usym
// key's second 8 bytes) that holds the process's start time: under it,
// the low 31 bits of the time in clock ticks after boot, as
// /proc/PID/stat's starttime (field 22) gives it. A slot without it (a
// target without BTF, where a program cannot read the time) names the
// process by its pid alone.
const ProcessStarted = 1 << 31

// ClockTickNS is a clock tick (USER_HZ, 100 a second on every
// architecture Linux runs on), the unit of /proc/PID/stat's times.
const ClockTickNS = 10_000_000

// Process is the process a program recorded a user address in.
type Process struct {
	PID int
	// Start is the slot's high half: ProcessStarted and the low 31 bits
	// of the start time, or 0 (not recorded).
	Start uint32
}

// ProcessOf is the process a slot's second 8 bytes name: the tgid in the
// low half, the start time (see [ProcessStarted]) in the high one.
func ProcessOf(slot uint64) Process {
	return Process{PID: int(uint32(slot)), Start: uint32(slot >> 32)}
}

// Exited is what a frame of the process shows when it has exited.
func (p Process) Exited() string { return fmt.Sprintf("process %d exited", p.PID) }

// Running reports whether the process still runs (when its start time
// was recorded: the process with its pid now started then) and the uid it
// runs as (the owner of /proc/PID: its effective uid).
func (p Process) Running() (uid int, ok bool) {
	if p.PID <= 0 {
		return -1, false
	}
	dir := "/proc/" + strconv.Itoa(p.PID)
	var st syscall.Stat_t
	if syscall.Stat(dir, &st) != nil {
		return -1, false
	}
	if p.Start&ProcessStarted != 0 {
		start, err := StartTime(p.PID)
		if err != nil || uint32(start)&(ProcessStarted-1) != p.Start&(ProcessStarted-1) {
			return -1, false
		}
	}
	return int(st.Uid), true
}

// StartTime is when process pid started, in clock ticks after boot
// (/proc/PID/stat's field 22).
func StartTime(pid int) (uint64, error) {
	b, err := bpf.ReadRegular(fmt.Sprintf("/proc/%d/stat", pid), 4096)
	if err != nil {
		return 0, err
	}
	// "pid (comm) state ppid ...": comm may hold anything, ")" too; the
	// fields after the last ")" start at field 3.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no \")\"", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name, want 20", pid, len(f))
	}
	return strconv.ParseUint(string(f[19]), 10, 64)
}

// ownID is this process's effective uid: a file it owns is as trusted as
// root's.
var ownID = uint32(os.Geteuid())
