// Command mktable merges the PROBECTL-ROUTECOST lines that bench/routes
// prints in each kernel of the matrix (read from the files named, the VM
// consoles' logs) into the cost table the compiler embeds:
//
//	mktable -o compiler/routecost.json LOG...
//
// A kernel that was not run keeps its entry. One that was has its
// families replaced by those the line measured and keeps the others: a
// line with no kernel-function figures (TestTracepointRouteCost's, make
// routes-table ROUTES_TEST=tracepoints) adds the tracepoint families and
// keeps the function families, their hit function and baseline.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/probectl/probectl/compiler"
)

const note = "Written by make routes-table (bench/routes in the VM matrix, QEMU TCG): per-hit ns are the medians over interleaved rounds of a getppid call's added time (the fastest burst of 1,000 calls, probed less unprobed) with a trivial program attached to the system call's function, and attach ms the link create + close time by number of functions. Emulated times: compare families within one kernel only."

func main() {
	out := flag.String("o", "compiler/routecost.json", "the table to update")
	flag.Parse()
	var table compiler.RouteCosts
	if b, err := os.ReadFile(*out); err == nil {
		if err := json.Unmarshal(b, &table); err != nil {
			fail(fmt.Errorf("%s: %w", *out, err))
		}
	}
	byName := map[string]compiler.KernelCost{}
	for _, k := range table.Kernels {
		byName[k.Kernel] = k
	}
	found := 0
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fail(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			_, line, ok := strings.Cut(sc.Text(), "PROBECTL-ROUTECOST ")
			if !ok {
				continue
			}
			var k compiler.KernelCost
			if err := json.Unmarshal([]byte(strings.TrimSpace(line)), &k); err != nil {
				fail(fmt.Errorf("%s: %w", name, err))
			}
			byName[k.Kernel] = merge(byName[k.Kernel], k)
			found++
			fmt.Fprintf(os.Stderr, "mktable: %s (%s)\n", k.Kernel, k.Release)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			fail(err)
		}
	}
	if found == 0 {
		fail(fmt.Errorf("no PROBECTL-ROUTECOST line in %v", flag.Args()))
	}
	table.Note, table.Kernels = note, nil
	for _, k := range byName {
		table.Kernels = append(table.Kernels, k)
	}
	sort.Slice(table.Kernels, func(i, j int) bool { return table.Kernels[i].Kernel < table.Kernels[j].Kernel })
	b, err := json.MarshalIndent(table, "", "  ")
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		fail(err)
	}
}

// merge lays the new measurement of a kernel over its old entry: the new
// families replace theirs, the others stay; without a hit function (a
// tracepoint-only line) the old hit function and baseline stay too.
func merge(old, k compiler.KernelCost) compiler.KernelCost {
	if old.Kernel == "" {
		return k
	}
	for fam, fc := range old.Families {
		if _, ok := k.Families[fam]; !ok {
			if k.Families == nil {
				k.Families = map[compiler.Family]compiler.FamilyCost{}
			}
			k.Families[fam] = fc
		}
	}
	if k.HitFunction == "" {
		k.HitFunction, k.BaselineNS = old.HitFunction, old.BaselineNS
	}
	if k.HitEvent == "" {
		k.HitEvent = old.HitEvent
	}
	return k
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mktable:", err)
	os.Exit(1)
}
