package runtime

import (
	"fmt"
	"sync"

	"github.com/cilium/ebpf/rlimit"
)

var (
	memlockOnce sync.Once
	memlockErr  error
)

// raiseMemlock lifts RLIMIT_MEMLOCK where the kernel charges BPF memory
// to it (before 5.11's memcg accounting: Debian 11's 5.10, whose default
// 8 MiB refuses the maps of a few probes); elsewhere it changes nothing.
// Once per process, before the first map or program is made.
func raiseMemlock() error {
	memlockOnce.Do(func() {
		if err := rlimit.RemoveMemlock(); err != nil {
			memlockErr = fmt.Errorf("this kernel charges BPF maps to RLIMIT_MEMLOCK (before Linux 5.11), and raising it failed: %w (probectl needs CAP_SYS_RESOURCE here, as root has)", err)
		}
	})
	return memlockErr
}
