// Command refload loads a hand-written reference BPF object (bench/reference,
// compiled by clang), attaches its program, says "attached", and on SIGINT
// or SIGTERM prints what its map "calls" holds: one line per key, the key's
// text and the value summed over CPUs, then "runtime NS COUNT", its
// programs' run time and run count. bench/perhit.sh compares probectl's
// generated programs with these.
//
//	refload -obj tp_count.o -tracepoint syscalls:sys_enter_getppid
//	refload -obj up_lat.o -uprobe /path/bin:func
//	refload -runtime PIN...     (probectl's pinned programs: "runtime NS COUNT")
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
	runtimes := flag.Bool("runtime", false, "print the run time and run count of the pinned programs given as arguments, summed, and exit")
	flag.Parse()
	if *runtimes {
		if err := printRuntime(flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "refload:", err)
			os.Exit(1)
		}
		return
	}
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
		l, err := attach(name, p, spec.Programs[name], tp, up)
		if err != nil {
			return err
		}
		links = append(links, l)
	}
	fmt.Println("attached")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	var progs []*ebpf.Program
	for _, p := range coll.Programs {
		progs = append(progs, p)
	}
	if err := printStats(progs); err != nil {
		return err
	}
	calls := coll.Maps["calls"]
	if calls == nil {
		return errors.New("the object has no map named calls")
	}
	return printCalls(calls)
}

// attach attaches the program name, p (of spec ps), to the tracepoint
// tp or the uprobe up.
func attach(name string, p *ebpf.Program, ps *ebpf.ProgramSpec, tp, up string) (link.Link, error) {
	attached := func(l link.Link, err error) (link.Link, error) {
		if err != nil {
			return nil, fmt.Errorf("attach %s: %w", name, err)
		}
		return l, nil
	}
	switch {
	case tp != "":
		group, event, ok := strings.Cut(tp, ":")
		if !ok {
			return nil, errors.New("-tracepoint GROUP:EVENT")
		}
		return attached(link.Tracepoint(group, event, p, nil))
	case up != "":
		bin, fn, ok := strings.Cut(up, ":")
		if !ok {
			return nil, errors.New("-uprobe BINARY:FUNCTION")
		}
		ex, err := link.OpenExecutable(bin)
		if err != nil {
			return nil, err
		}
		// uprobe.multi (6.6+), the link family probectl's plan
		// chooses there: the same on both sides.
		if strings.HasPrefix(ps.SectionName, "uretprobe") {
			return attached(ex.UretprobeMulti([]string{fn}, p, nil))
		}
		return attached(ex.UprobeMulti([]string{fn}, p, nil))
	default:
		return nil, errors.New("give -tracepoint or -uprobe")
	}
}

// printCalls prints each key of calls, as text (a comm) or a number, and
// its value summed over CPUs.
func printCalls(calls *ebpf.Map) error {
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

// printStats prints "runtime NS COUNT": the kernel's run time and run count
// of the programs, summed (counted only while kernel.bpf_stats_enabled is
// 1; bench/perhit.sh turns it on for its body rounds).
func printStats(progs []*ebpf.Program) error {
	var ns, cnt uint64
	for _, p := range progs {
		st, err := p.Stats()
		if err != nil {
			return err
		}
		ns += uint64(st.Runtime.Nanoseconds())
		cnt += st.RunCount
	}
	fmt.Printf("runtime %d %d\n", ns, cnt)
	return nil
}

// printRuntime is printStats for pinned programs (probectl's).
func printRuntime(pins []string) error {
	var progs []*ebpf.Program
	for _, pin := range pins {
		p, err := ebpf.LoadPinnedProgram(pin, nil)
		if err != nil {
			return err
		}
		defer p.Close()
		progs = append(progs, p)
	}
	return printStats(progs)
}
