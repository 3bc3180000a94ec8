package bpf

import (
	"errors"
	"fmt"
	"os"
)

// LoadTarget resolves a target as plan -target names it: "auto" (or "")
// for the running kernel, with the formats of events read from tracefs; a
// built-in profile's name; or a facts file written by probectl target -o.
//
// For the live kernel, only what the spec needs is read: the kernel's
// function list (a quarter of a second: the kernel writes it anew at each
// read) only when functions is true, that is when the spec has kernel
// probes; the tracepoint formats of events.
func LoadTarget(target string, events []string, functions bool) (*Facts, error) {
	if target == "auto" || target == "" {
		if err := CheckPrivileges(); err != nil {
			return nil, fmt.Errorf("-target auto reads the live kernel and needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), which this process lacks: run it as root, or plan for a profile: -target %s", ProfileNames()[0])
		}
		facts, err := Detect(DetectOptions{Functions: functions})
		if err != nil {
			return nil, err
		}
		if err := facts.LoadTracepoints(events); err != nil {
			return nil, err
		}
		return facts, nil
	}
	if f, err := Profile(target); err == nil {
		return f, nil
	}
	if _, err := os.Stat(target); err == nil || !errors.Is(err, os.ErrNotExist) {
		return ReadFactsFile(target)
	}
	return nil, fmt.Errorf("-target %q is neither auto, a profile (%v), nor a facts file", target, ProfileNames())
}
