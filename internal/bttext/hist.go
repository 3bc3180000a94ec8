package bttext

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// barWidth is the width of a hist row's bar: the largest count fills it.
const barWidth = 52

// HistIndex is the bucket of a hist a value falls in: 0 for a negative
// value, 1 for 0, k >= 2 for [2^(k-2), 2^(k-1)). bpftrace 0.17's log2
// looks at 32 bits: a value of 2^32 or more counts in [2G, 4G).
func HistIndex(v int64) int {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return 1
	}
	return min(bits.Len64(uint64(v)), 32) + 1
}

// Hist is a hist's rows as bpftrace prints them, counts indexed as
// HistIndex says: from the first non-zero bucket to the last, each
// "[lo, hi)" (powers of 1024 as K, M, G, ...), its count and a bar.
func Hist(counts []uint64) string {
	return rows(counts, func(i int) string {
		switch i {
		case 0:
			return "(..., 0)"
		case 1:
			return "[0]"
		case 2:
			return "[1]"
		}
		return "[" + power(1<<(i-2)) + ", " + power(1<<(i-1)) + ")"
	})
}

// LhistIndex is the bucket of an lhist(min, max, step) a value falls in:
// 0 below min, then one per step, the last for max and above.
func LhistIndex(v, min, max, step int64) int {
	switch {
	case v < min:
		return 0
	case v >= max:
		return int((max-min+step-1)/step) + 1
	}
	return int((v-min)/step) + 1
}

// Lhist is an lhist's rows as bpftrace prints them, counts indexed as
// LhistIndex says.
func Lhist(counts []uint64, min, max, step int64) string {
	last := int((max-min+step-1)/step) + 1
	return rows(counts, func(i int) string {
		switch {
		case i == 0:
			return "(..., " + lhistLabel(min) + ")"
		case i == last:
			return "[" + lhistLabel(max) + ", ...)"
		}
		lo := min + int64(i-1)*step
		return "[" + lhistLabel(lo) + ", " + lhistLabel(lo+step) + ")"
	})
}

func rows(counts []uint64, label func(int) string) string {
	first, last := -1, -1
	var top uint64
	for i, c := range counts {
		if c == 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
		top = max(top, c)
	}
	var b strings.Builder
	for i := first; i >= 0 && i <= last; i++ {
		// bpftrace computes the bar in float: count/(float)top*52.
		n := int(float32(counts[i]) / float32(top) * barWidth)
		fmt.Fprintf(&b, "%-16s%8d |%s%s|\n", label(i), counts[i], strings.Repeat("@", n), strings.Repeat(" ", barWidth-n))
	}
	return b.String()
}

// power is n as bpftrace labels a hist's bound: 1K, 2M, ... for multiples
// of powers of 1024.
func power(n uint64) string {
	suffix := ""
	for _, s := range []string{"K", "M", "G", "T", "P", "E"} {
		if n < 1024 || n%1024 != 0 {
			break
		}
		n /= 1024
		suffix = s
	}
	return strconv.FormatUint(n, 10) + suffix
}

// lhistLabel is an lhist's bound as bpftrace labels it: a non-zero
// multiple of 1M as NM, of 1K as NK.
func lhistLabel(n int64) string {
	switch {
	case n != 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n/(1<<20), 10) + "M"
	case n != 0 && n%1024 == 0:
		return strconv.FormatInt(n/1024, 10) + "K"
	}
	return strconv.FormatInt(n, 10)
}
