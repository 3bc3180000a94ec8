package bpftrace

import (
	"strings"
	"sync"

	"github.com/probectl/probectl/bpf"
)

// What bpftrace reads from the running kernel (a tracepoint field's type)
// the importer reads from the built-in profiles, the kernels of the VM
// matrix: never the machine it runs on, so that an import is the same
// everywhere.

var profileFacts = sync.OnceValue(func() []*bpf.Facts {
	var out []*bpf.Facts
	for _, name := range bpf.ProfileNames() {
		if f, err := bpf.Profile(name); err == nil {
			out = append(out, f)
		}
	}
	return out
})

// pointee is the struct a tracepoint field points to ("struct
// __kernel_timespec" for sys_enter_nanosleep's rqtp), as every profile's
// format of every event names it: "" when no profile has the field, when
// it is no pointer to one struct, or when the formats disagree.
func pointee(events []string, field string) string {
	found := ""
	for _, f := range profileFacts() {
		for _, ev := range events {
			tp, err := f.Tracepoint(ev)
			if err != nil {
				continue
			}
			fl := tp.Field(field)
			if fl == nil {
				continue
			}
			s := structOf(fl.Type)
			if s == "" || found != "" && s != found {
				return ""
			}
			found = s
		}
	}
	return found
}

// structOf is the struct a pointer type points to: "struct X" of "struct
// X *" or "const struct X *"; "" for anything else.
func structOf(typ string) string {
	t := strings.TrimSpace(typ)
	if !strings.HasSuffix(t, "*") {
		return ""
	}
	t = strings.TrimSpace(strings.TrimSuffix(t, "*"))
	t = strings.TrimSpace(strings.TrimPrefix(t, "const "))
	if strings.Contains(t, "*") || !strings.HasPrefix(t, "struct ") && !strings.HasPrefix(t, "union ") {
		return ""
	}
	return strings.Join(strings.Fields(t), " ")
}

// userPointers: a system call's tracepoint fields point into the calling
// process's memory (bpftrace reads them as user memory too).
func userPointers(events []string) bool {
	for _, ev := range events {
		if !strings.HasPrefix(ev, "syscalls:") {
			return false
		}
	}
	return len(events) > 0
}
