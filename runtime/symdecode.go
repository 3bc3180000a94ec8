package runtime

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/probectl/probectl/bpf/symbols"
	"github.com/probectl/probectl/compiler/compiled"
)

// The address decoders: ksym(x) and usym(x) show an address as the
// function it falls in, the way a stack frame shows ("vfs_read+0x12",
// "ext4_readdir [ext4]", "worker [sym-work]"); an address no symbol covers
// shows in hex.

// kernelSyms is /proc/kallsyms, read when a ksym is first shown and again
// (at most once a second) when an address falls in no symbol: a module
// loaded since.
var kernelSyms struct {
	mu     sync.Mutex
	k      *symbols.KernelSymbols
	loaded time.Time
}

// decodeKsym shows a kernel address as func+0xoff [module].
func decodeKsym(_ compiled.KeyField, raw []byte) any {
	addr := uint64(decodeInt(raw))
	kernelSyms.mu.Lock()
	defer kernelSyms.mu.Unlock()
	if kernelSyms.k == nil || time.Since(kernelSyms.loaded) > time.Second {
		if f := kernelSyms.k.Frame(addr); kernelSyms.k == nil || f.Symbol == "" {
			if k, err := symbols.LoadKernelSymbols(); err == nil {
				kernelSyms.k = k
			}
			kernelSyms.loaded = time.Now()
		}
	}
	return kernelSyms.k.Frame(addr).String()
}

// userSyms symbolizes the addresses of usym, through the maps of the
// processes that recorded them. It is refreshed when a second old
// (UserSymbols.Refresh): files are read again as they are now, and the
// maps of a process known by pid alone (its pid may be another's); a
// process known by its start time keeps the maps and files read while it
// ran, so that its addresses are named after it exits.
var userSyms struct {
	mu        sync.Mutex
	u         *symbols.UserSymbols
	refreshed time.Time
}

// decodeUsym shows a user address (the slot's first 8 bytes) of the
// process that recorded it (the next 8: its pid and start time) as
// func+0xoff [file], while that process runs, and after it has exited
// when this probectl read its maps while it ran. Otherwise (its pid
// another's or no one's) the address shows with that said: a single
// address keeps no build id (only stacks do).
func decodeUsym(_ compiled.KeyField, raw []byte) any {
	if len(raw) < 16 {
		return fmt.Sprintf("usym %x", raw)
	}
	addr := binary.LittleEndian.Uint64(raw[:8])
	p := symbols.ProcessOf(binary.LittleEndian.Uint64(raw[8:16]))
	switch {
	case addr == 0:
		return "0x0"
	case p.PID <= 0 || p.PID > 1<<22:
		return fmt.Sprintf("0x%x (no process)", addr)
	}
	userSyms.mu.Lock()
	switch {
	case userSyms.u == nil:
		userSyms.u, userSyms.refreshed = symbols.NewUserSymbols("", nil), time.Now()
	case time.Since(userSyms.refreshed) > time.Second:
		userSyms.u.Refresh()
		userSyms.refreshed = time.Now()
	}
	u := userSyms.u
	userSyms.mu.Unlock()
	return u.FrameAt(p, addr).String()
}
