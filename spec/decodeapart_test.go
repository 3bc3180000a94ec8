package spec

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// brokenProbes are probe blocks with one mistake each, of the decoder's
// and of the set's (a second probe at an address).
var brokenProbes = []string{
	"probe \"kernal\" \"bad_kind_%d\" {\n  functions = [\"vfs_read\"]\n  on_entry {\n    count \"c\" {}\n  }\n}\n",
	"probe \"kernel\" \"1bad_name_%d\" {\n  functions = [\"vfs_read\"]\n  on_entry {\n    count \"c\" {}\n  }\n}\n",
	"probe \"kernel\" \"misspelt_%d\" {\n  functons = [\"vfs_read\"]\n  on_entry {\n    count \"c\" {}\n  }\n}\n",
	"probe \"kernel\" \"empty_%d\" {\n  functions = [\"vfs_read\"]\n  on_entry {\n  }\n}\n",
	"probe \"tracepoint\" \"dup\" {\n  event = \"sched:sched_switch\"\n  on_entry {\n    count \"c%d\" {}\n  }\n}\n",
	"probe \"tracepoint\" \"noexit_%d\" {\n  event = \"sched:sched_switch\"\n  on_exit {\n    count \"c\" {}\n  }\n}\n",
	"probe \"user\" \"nobinary_%d\" {\n  functions = [\"malloc\"]\n  on_entry {\n    hist \"h\" { value = arg0 + comm }\n  }\n}\n",
}

// goodProbes are probe blocks that decode.
var goodProbes = []string{
	"probe \"tracepoint\" \"t_%d\" {\n  event = \"syscalls:sys_enter_openat\"\n  on_entry {\n    when = pid != 1\n    count \"tcalls\" { by = [comm, args.flags] }\n  }\n}\n",
	"probe \"kernel\" \"k_%d\" {\n  functions = [\"ksys_write\", \"vfs_*\"]\n  on_entry {\n    save = { start = ktime }\n  }\n  on_exit {\n    hist \"klat\" { value = ktime - entry.start }\n  }\n}\n",
	"probe \"user\" \"u_%d\" {\n  binary    = \"libc\"\n  functions = [\"malloc\", \"free\"]\n  on_entry {\n    hist \"ubytes\" { value = arg0 }\n  }\n}\n",
}

// Decoding a file's probes on every CPU gives what decoding them in turn
// gives: the same probes, and the same diagnostics in the same order, for
// files of good and broken probes mixed at random (the seed is logged).
func TestDecodeApartSame(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for trial := range 4 {
		files := map[string][]byte{}
		for f := range 2 {
			var b strings.Builder
			for i := range decodeApartMin * 2 {
				blocks := goodProbes
				if r.IntN(5) == 0 {
					blocks = brokenProbes
				}
				fmt.Fprintf(&b, blocks[r.IntN(len(blocks))], f*1000+i)
			}
			files[fmt.Sprintf("f%d.hcl", f)] = []byte(b.String())
		}
		apart, apartDiags := parseSet(files, true)
		inTurn, inTurnDiags := parseSet(files, false)
		if a, b := fmt.Sprint(apartDiags), fmt.Sprint(inTurnDiags); a != b {
			t.Fatalf("trial %d: diagnostics decoded apart:\n%s\nin turn:\n%s", trial, a, b)
		}
		if len(apart.Probes) != len(inTurn.Probes) {
			t.Fatalf("trial %d: %d probes decoded apart, %d in turn", trial, len(apart.Probes), len(inTurn.Probes))
		}
		for i := range apart.Probes {
			if !reflect.DeepEqual(apart.Probes[i], inTurn.Probes[i]) {
				t.Fatalf("trial %d: probe %s decoded apart differs from %s in turn", trial, apart.Probes[i].Addr, inTurn.Probes[i].Addr)
			}
		}
		if len(apartDiags) == 0 || len(apart.Probes) < decodeApartMin {
			t.Fatalf("trial %d: %d diagnostics, %d probes: the files did not test both", trial, len(apartDiags), len(apart.Probes))
		}
	}
}
