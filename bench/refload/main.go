// Command refload loads a hand-written reference BPF object (bench/reference,
// compiled by clang), attaches its program, says "attached", and on SIGINT
// or SIGTERM prints what its map "calls" holds: one line per key, the key's
// text and the value summed over CPUs. bench/perhit.sh compares probectl's
// generated programs with these.
//
//	refload -obj tp_count.o -tracepoint syscalls:sys_enter_getppid
//	refload -obj up_lat.o -uprobe /path/bin:func
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

func main() {
	obj := flag.String("obj", "", "the reference object")
	tp := flag.String("tracepoint", "", "GROUP:EVENT to attach the tracepoint program to")
	up := flag.String("uprobe", "", "BINARY:FUNCTION to attach the uprobe (and uretprobe) programs to")
	flag.Parse()
	if err := run(*obj, *tp, *up); err != nil {
		fmt.Fprintln(os.Stderr, "refload:", err)
		os.Exit(1)
	}
}

func run(obj, tp, up string) error {
	spec, err := ebpf.LoadCollectionSpec(obj)
	if err != nil {
		return err
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return err
	}
	defer coll.Close()
	var links []link.Link
	defer func() {
		for _, l := range links {
			l.Close()
		}
	}()
	for name, p := range coll.Programs {
		ps := spec.Programs[name]
		var l link.Link
		switch {
		case tp != "":
			group, event, ok := strings.Cut(tp, ":")
			if !ok {
				return errors.New("-tracepoint GROUP:EVENT")
			}
			l, err = link.Tracepoint(group, event, p, nil)
		case up != "":
			bin, fn, ok := strings.Cut(up, ":")
			if !ok {
				return errors.New("-uprobe BINARY:FUNCTION")
			}
			ex, err2 := link.OpenExecutable(bin)
			if err2 != nil {
				return err2
			}
			// uprobe.multi (6.6+), the link family probectl's plan
			// chooses there: the same on both sides.
			if strings.HasPrefix(ps.SectionName, "uretprobe") {
				l, err = ex.UretprobeMulti([]string{fn}, p, nil)
			} else {
				l, err = ex.UprobeMulti([]string{fn}, p, nil)
			}
		default:
			return errors.New("give -tracepoint or -uprobe")
		}
		if err != nil {
			return fmt.Errorf("attach %s: %w", name, err)
		}
		links = append(links, l)
	}
	fmt.Println("attached")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	calls := coll.Maps["calls"]
	if calls == nil {
		return errors.New("the object has no map named calls")
	}
	var key []byte
	var values []uint64
	it := calls.Iterate()
	for it.Next(&key, &values) {
		var sum uint64
		for _, v := range values {
			sum += v
		}
		k := string(bytes.TrimRight(key, "\x00"))
		if calls.KeySize() != 16 { // not a comm: the key as a number
			var n uint64
			for i := len(key) - 1; i >= 0; i-- {
				n = n<<8 | uint64(key[i])
			}
			k = fmt.Sprint(n)
		}
		fmt.Printf("%s %d\n", k, sum)
	}
	return it.Err()
}
