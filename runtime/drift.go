package runtime

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/bpf/sys"
	"github.com/probectl/probectl/compiler/compiled"
)

// Drift checks every probe and table and returns what is damaged, by
// address.
func (w *Workspace) Drift(s *State) map[bpf.Address][]string {
	out := map[bpf.Address][]string{}
	drift := make([][]string, len(s.Probes))
	parallel(len(s.Probes), func(i int) { drift[i], _, _ = w.checkProbe(s.Probes[i], false) })
	for i, p := range s.Probes {
		if len(drift[i]) > 0 {
			out[p.Address] = drift[i]
		}
	}
	for _, t := range s.Tables {
		if d := w.checkTable(t); len(d) > 0 {
			out[t.Address] = d
		}
	}
	if s.Events != nil {
		if d := w.checkEvents(s.Events); len(d) > 0 {
			out[s.Events.Address] = d
		}
	}
	return out
}

// checkTable checks a table's pins: there, and the maps recorded.
func (w *Workspace) checkTable(t *TableState) []string {
	d, err := w.tableDir(t)
	if err != nil {
		return []string{"pins gone"}
	}
	defer d.close()
	var drift []string
	for _, m := range t.Pins {
		drift = append(drift, checkMapPin(d, m)...)
	}
	return drift
}

// checkMapPin checks that a map's pin is there and names the map
// recorded.
func checkMapPin(d *dir, m MapState) []string {
	path, _ := d.procPath(m.Pin)
	info, err := sys.ReadPinnedObject(path)
	switch {
	case err != nil:
		return []string{fmt.Sprintf("map %s: pin gone", m.Name)}
	case ebpf.MapID(info.ID) != m.ID:
		return []string{fmt.Sprintf("map %s: replaced (id %d, was %d)", m.Name, info.ID, m.ID)}
	}
	return nil
}

// recursionMisses is how many times the kernel did not run the program
// because a BPF program was already running on the CPU: a tracepoint that
// fires in an interrupt (sched_wakeup from a timer, block_rq_complete)
// while a program runs in the interrupted context is skipped. 0 when the
// program cannot be read.
func recursionMisses(id ebpf.ProgramID) uint64 {
	prog, err := ebpf.NewProgramFromID(id)
	if err != nil {
		return 0
	}
	defer prog.Close()
	stats, err := prog.Stats()
	if err != nil {
		return 0
	}
	return stats.RecursionMisses
}

// checkProbe compares a probe's pins with the kernel: every pin must be
// there, every link must still run the program probectl attached, and a
// user probe's binary must still be the file it is attached to. With
// counters, it also reads the probe's stats map (summed over the CPUs)
// while it checks that map's pin. It opens every pin with raw bpf(2)
// calls, two or three each: status does it for every probe.
func (w *Workspace) checkProbe(p *ProbeState, counters bool) (drift []string, missed uint64, counts []uint64) {
	drift = checkBinary(p)
	d, err := w.probeDir(p)
	if err != nil {
		why := "pins gone"
		if p.BootID != "" && p.BootID != bootID() {
			why = "pins gone: the machine rebooted since it was applied"
		}
		return append(drift, why), 0, nil
	}
	defer d.close()
	mapDrift, counts := checkMaps(d, p, counters)
	progDrift, progMiss := checkPrograms(d, p)
	linkDrift, linkMiss := checkLinks(d, p)
	drift = append(append(append(drift, mapDrift...), progDrift...), linkDrift...)
	return drift, progMiss + linkMiss, counts
}

// checkBinary checks that a user probe's binary is still the file it is
// attached to.
func checkBinary(p *ProbeState) []string {
	if p.BinaryFile == nil {
		return nil
	}
	now, err := fileID(p.Root, p.Binary)
	switch {
	case err != nil:
		return []string{fmt.Sprintf("binary %s: %v (the probes stay on the old file)", p.Binary, err)}
	case !now.Same(p.BinaryFile):
		return []string{fmt.Sprintf("binary %s replaced (%s, was %s): the probes stay on the old file", p.Binary, now, p.BinaryFile)}
	}
	return nil
}

// checkMaps checks a probe's map pins; with counters, it reads the stats
// map while it checks that map's pin.
func checkMaps(d *dir, p *ProbeState, counters bool) (drift []string, counts []uint64) {
	for _, m := range p.Maps {
		if !counters || m.Ref != refStats {
			drift = append(drift, checkMapPin(d, m)...)
			continue
		}
		sums, why, err := readStatsPin(d, p, m)
		if why != "" {
			drift = append(drift, why)
		} else if err == nil {
			counts = sums
		}
	}
	return drift, counts
}

// checkPrograms checks a probe's program pins and sums the runs the kernel
// skipped.
func checkPrograms(d *dir, p *ProbeState) (drift []string, missed uint64) {
	for _, pr := range p.Programs {
		path, _ := d.procPath(pr.Pin)
		info, err := sys.ReadPinnedProgram(path) // programs open read-write only
		if err != nil {
			drift = append(drift, fmt.Sprintf("program %s: pin gone", pr.Name))
			continue
		}
		if ebpf.ProgramID(info.ID) != pr.ID {
			drift = append(drift, fmt.Sprintf("program %s: replaced (id %d, was %d)", pr.Name, info.ID, pr.ID))
		}
		missed += info.RecursionMisses
	}
	return drift, missed
}

// checkLinks checks that every link of a probe is pinned and still runs
// the program probectl attached, and sums the hits it missed.
func checkLinks(d *dir, p *ProbeState) (drift []string, missed uint64) {
	programs := map[ebpf.ProgramID]bool{}
	for _, l := range p.Links {
		if len(p.Programs) == 0 && !programs[l.ProgramID] {
			// A state from before programs were pinned: by id (root).
			programs[l.ProgramID] = true
			missed += recursionMisses(l.ProgramID)
		}
		path, _ := d.procPath(l.Pin)
		why, ok := checkLinkPin(l, path)
		drift = append(drift, why...)
		if ok {
			missed += linkMissed(l.Family, path)
		}
	}
	return drift, missed
}

// checkLinkPin checks one link's pin at path; ok when the pin is there.
func checkLinkPin(l LinkState, path string) (drift []string, ok bool) {
	what := string(l.Family)
	if l.Function != "" {
		what += " " + l.Function
	}
	info, err := sys.ReadPinnedObject(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return []string{fmt.Sprintf("link %s: pin gone", what)}, false
		}
		return []string{fmt.Sprintf("link %s: %v", what, err)}, false
	}
	if link.ID(info.ID) != l.ID {
		drift = append(drift, fmt.Sprintf("link %s: replaced (id %d, was %d)", what, info.ID, l.ID))
	}
	if ebpf.ProgramID(info.ProgramID) != l.ProgramID {
		drift = append(drift, fmt.Sprintf("link %s: program replaced (id %d, was %d)", what, info.ProgramID, l.ProgramID))
	}
	return drift, true
}

// linkMissed is the count of hits the kernel reports it could not deliver
// through a link of a family that reports one (compiled.FamilyInfo's
// CountsMisses): read through cilium/ebpf's link info, which the other
// families need not pay for.
func linkMissed(family compiled.Family, path string) uint64 {
	if fi, _ := family.Info(); !fi.CountsMisses {
		return 0
	}
	lk, err := link.LoadPinnedLink(path, nil)
	if err != nil {
		return 0
	}
	defer lk.Close()
	info, err := lk.Info()
	if err != nil {
		return 0
	}
	var missed uint64
	if km := info.KprobeMulti(); km != nil {
		missed += km.Missed
	}
	if um := info.UprobeMulti(); um != nil {
		missed += um.Missed
	}
	if pe := info.PerfEvent(); pe != nil {
		if k := pe.Kprobe(); k != nil {
			missed += k.Missed
		}
	}
	return missed
}
