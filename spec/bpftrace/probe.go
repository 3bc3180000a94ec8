package bpftrace

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/probectl/probectl/bpf"
	"github.com/probectl/probectl/spec"
)

// target is one attach point, understood.
type target struct {
	pos    Pos
	family string // kprobe, kretprobe, uprobe, uretprobe, usdt, tracepoint, fentry, fexit, profile, interval, BEGIN, END
	name   string // function, GROUP:EVENT, or a USDT probe's PROVIDER:NAME
	binary string
	attrs  []kv // a profile's
}

var familyAliases = map[string]string{
	"k": "kprobe", "kprobe": "kprobe", "kr": "kretprobe", "kretprobe": "kretprobe",
	"u": "uprobe", "uprobe": "uprobe", "ur": "uretprobe", "uretprobe": "uretprobe",
	"t": "tracepoint", "tracepoint": "tracepoint",
	"f": "fentry", "fentry": "fentry", "kfunc": "fentry", "fr": "fexit", "fexit": "fexit", "kretfunc": "fexit",
	"p": "profile", "profile": "profile", "i": "interval", "interval": "interval",
	"s": "software", "software": "software", "h": "hardware", "hardware": "hardware",
	"rt": "rawtracepoint", "rawtracepoint": "rawtracepoint", "U": "usdt", "usdt": "usdt",
	"w": "watchpoint", "watchpoint": "watchpoint", "aw": "watchpoint", "asyncwatchpoint": "watchpoint",
	"it": "iter", "iter": "iter", "self": "self",
	"BEGIN": "BEGIN", "begin": "BEGIN", "END": "END", "end": "END",
}

// missingFamilies say why a probe type has no equivalent.
var missingFamilies = map[string]string{
	"rawtracepoint": "a raw tracepoint's arguments are the kernel's raw values; write the tracepoint (tracepoint:GROUP:EVENT, a tracepoint probe here) with its named fields",
	"watchpoint":    "probectl has no hardware watchpoints",
	"iter":          "probectl has no BPF iterators",
	"self":          "probectl has no probes on itself",
}

func (t *translator) target(a Attach) target {
	parts := strings.Split(a.Text, ":")
	fam, ok := familyAliases[parts[0]]
	if !ok {
		t.fail(a.Pos, "Unknown probe type", fmt.Sprintf("%q is not a bpftrace probe type (kprobe, tracepoint, uprobe, profile, BEGIN, ...).", parts[0]))
	}
	tg := target{pos: a.Pos, family: fam}
	if why, ok := missingFamilies[fam]; ok {
		t.fail(a.Pos, "Unsupported probe type "+fam, fmt.Sprintf("%s has no equivalent: %s.", a.Text, why))
	}
	bad := func(want string) {
		t.fail(a.Pos, "Invalid attach point", fmt.Sprintf("%q: expected %s.", a.Text, want))
	}
	switch fam {
	case "BEGIN", "END":
		if len(parts) != 1 {
			bad(fam + " alone")
		}
	case "kprobe", "kretprobe", "fentry", "fexit":
		if len(parts) < 2 || len(parts) > 3 {
			bad(fam + ":FUNCTION")
		}
		tg.name = parts[len(parts)-1]
		if strings.ContainsAny(tg.name, "+") {
			t.fail(a.Pos, "Unsupported probe offset", fmt.Sprintf("%q: a probe at an offset into a function has no equivalent; probes are at a function's entry or exit.", a.Text))
		}
	case "uprobe", "uretprobe":
		if len(parts) != 3 {
			bad(fam + ":BINARY:FUNCTION")
		}
		tg.binary, tg.name = parts[1], parts[2]
		if strings.ContainsAny(tg.name, "+") || strings.HasPrefix(tg.name, "0x") {
			t.fail(a.Pos, "Unsupported probe offset", fmt.Sprintf("%q: a uprobe at an address or an offset has no equivalent; probes are at a function's entry or exit.", a.Text))
		}
	case "usdt":
		switch len(parts) {
		case 4:
			tg.binary, tg.name = parts[1], parts[2]+":"+parts[3]
		case 3:
			t.fail(a.Pos, "USDT probe without provider", fmt.Sprintf("%q names the probe %s of any provider; a user probe's usdt names one, provider:name. Write usdt:%s:PROVIDER:%s (probectl list 'usdt:%s:%s' prints the provider).", a.Text, parts[2], parts[1], parts[2], parts[1], parts[2]))
		default:
			bad("usdt:BINARY:PROVIDER:NAME")
		}
		if strings.ContainsAny(tg.name, "*?[") || tg.binary == "" {
			t.fail(a.Pos, "Unsupported USDT glob", fmt.Sprintf("%q: a user probe attaches one USDT probe of one binary, named in full: write a probe for each.", a.Text))
		}
	case "tracepoint":
		if len(parts) != 3 {
			bad("tracepoint:GROUP:EVENT")
		}
		tg.name = parts[1] + ":" + parts[2]
	case "software", "hardware":
		// software:EVENT:COUNT, software:EVENT (bpftrace's default period).
		if len(parts) < 2 || len(parts) > 3 {
			bad(fam + ":EVENT:COUNT")
		}
		ev, ok := bpf.LookupPerfEvent(parts[1])
		if !ok || ev.Hardware != (fam == "hardware") {
			var names []string
			for _, e := range bpf.PerfEvents {
				if e.Hardware == (fam == "hardware") {
					names = append(names, e.Name)
				}
			}
			t.fail(a.Pos, "Unknown "+fam+" event", fmt.Sprintf("%q is not a %s event: bpftrace's are %s (and their aliases).", parts[1], fam, strings.Join(names, ", ")))
		}
		n := ev.DefaultPeriod
		if len(parts) == 3 && parts[2] != "" {
			v, err := strconv.ParseInt(parts[2], 10, 64)
			if err != nil || v <= 0 {
				bad("a positive count")
			}
			n = v
		}
		period := "period"
		if ev.Clock {
			period = "period_ns"
			if n < spec.MinPeriodNS {
				t.fail(a.Pos, "Unsupported "+fam+" period", fmt.Sprintf("%q samples %s every %d ns: profile probes sample a clock at most every %d ns.", a.Text, ev.Name, n, spec.MinPeriodNS))
			}
		}
		tg.name = ev.Name
		tg.attrs = []kv{{"event", quote(ev.Name)}, {period, strconv.FormatInt(n, 10)}}
		tg.family = "profile"
	case "profile":
		unit, count := "hz", ""
		switch len(parts) {
		case 2:
			count = parts[1]
		case 3:
			unit, count = parts[1], parts[2]
		default:
			bad(fam + ":UNIT:COUNT")
		}
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n <= 0 {
			bad("a positive count")
		}
		mult := map[string]int64{"s": 1e9, "ms": 1e6, "us": 1e3, "ns": 1}
		switch {
		case unit == "hz":
			tg.attrs = []kv{{"frequency", strconv.FormatInt(n, 10)}}
		case mult[unit] != 0:
			tg.attrs = []kv{{"period_ns", strconv.FormatInt(n*mult[unit], 10)}}
		default:
			bad("profile:hz:N, profile:s:N, profile:ms:N or profile:us:N")
		}
	case "interval":
		// Only printing: probectl run -interval.
	}
	return tg
}

// probeKinds are the spec's probe kinds of bpftrace's families, and
// whether the handler is on_exit.
var probeKinds = map[string]struct {
	kind string
	exit bool
}{
	"kprobe": {"kernel", false}, "fentry": {"kernel", false}, "kretprobe": {"kernel", true}, "fexit": {"kernel", true},
	"uprobe": {"user", false}, "uretprobe": {"user", true}, "usdt": {"user", false},
	"tracepoint": {"tracepoint", false}, "profile": {"profile", false},
}

func (t *translator) probe(p *Probe) {
	var targets []target
	for _, a := range p.Attach {
		targets = append(targets, t.target(a))
	}
	fam := targets[0].family
	if fam == "interval" && callsKaddr(p) {
		// A body that reads kernel variables runs in the kernel, as
		// bpftrace's interval probes do: a cpu-clock timer on one CPU,
		// the interval its period.
		tg := &targets[0]
		d, err := time.ParseDuration(intervalOf(p.Attach[0].Text))
		if err != nil || d.Nanoseconds() < spec.MinPeriodNS || d.Nanoseconds() > spec.MaxPeriodNS {
			t.fail(tg.pos, "Unsupported interval", fmt.Sprintf("%q reads kernel variables every %s: a timer in the kernel fires every %d ns to %d s.", p.Attach[0].Text, intervalOf(p.Attach[0].Text), spec.MinPeriodNS, int64(spec.MaxPeriodNS/1e9)))
		}
		tg.family, tg.name = "profile", "interval"
		tg.attrs = []kv{{"event", quote(bpf.EventCPUClock)}, {"period_ns", strconv.FormatInt(d.Nanoseconds(), 10)}, {"one_cpu", "true"}}
		fam = "profile"
	}
	for _, tg := range targets[1:] {
		if tg.family != fam && probeKinds[tg.family] != probeKinds[fam] {
			t.fail(tg.pos, "Mixed probe types", fmt.Sprintf("%s and %s in one probe: here each kind is a probe of its own; write the block once per kind.", fam, tg.family))
		}
	}
	switch fam {
	case "BEGIN", "END", "interval":
		t.pending = append(t.pending, p.Comments...)
		t.special(p, fam)
		return
	}
	pk := probeKinds[fam]
	// One spec probe per binary (a user probe names one).
	var groups [][]target
	for _, tg := range targets {
		found := false
		for i, g := range groups {
			// A user probe attaches one USDT probe, or functions.
			usdt := g[0].family == "usdt" || tg.family == "usdt"
			if g[0].binary == tg.binary && (!usdt || g[0].family == tg.family && g[0].name == tg.name) {
				groups[i] = append(groups[i], tg)
				found = true
			}
		}
		if !found {
			groups = append(groups, []target{tg})
		}
	}
	for gi, g := range groups {
		var names []string
		for _, tg := range g {
			names = append(names, tg.name)
		}
		sorted := append([]string(nil), names...)
		sort.Strings(sorted)
		key := pk.kind + "|" + g[0].binary + "|" + strings.Join(sorted, ",")
		usdt := g[0].family == "usdt"
		if usdt {
			key = "usdt|" + key
		}
		if p.Filter != nil && !pk.exit {
			key += "|filtered@" + strconv.Itoa(p.Pos.Off)
		}
		var op *outProbe
		idx := -1
		for i, o := range t.probes {
			if o.key == key && ((pk.exit && o.exit == nil) || (!pk.exit && o.entry == nil)) {
				op, idx = o, i
				break
			}
		}
		if op == nil {
			first := names[0]
			switch {
			case pk.kind == "profile" && g[0].name != "":
				first = g[0].name // software:page-faults: page_faults
			case pk.kind == "profile":
				first = "profile"
			case usdt:
				_, first, _ = strings.Cut(first, ":")
			}
			op = &outProbe{pos: p.Pos, kind: pk.kind, key: key, name: t.probeName(first)}
			switch pk.kind {
			case "tracepoint":
				op.attrs = append(op.attrs, kv{"event", list(quoteAll(names))})
			case "kernel":
				op.attrs = append(op.attrs, kv{"functions", "[" + strings.Join(quoteAll(names), ", ") + "]"})
			case "user":
				if usdt {
					op.attrs = append(op.attrs, kv{"binary", quote(g[0].binary)}, kv{"usdt", quote(names[0])})
					break
				}
				op.attrs = append(op.attrs, kv{"binary", quote(g[0].binary)}, kv{"functions", "[" + strings.Join(quoteAll(names), ", ") + "]"})
			case "profile":
				op.attrs = append(op.attrs, g[0].attrs...)
				if len(g) > 1 {
					t.fail(g[1].pos, "Several profile rates", "One profile probe samples at one rate: write a probe per rate.")
				}
			}
			if t.optional {
				op.attrs = append(op.attrs, kv{"optional", "true"})
			}
			t.probes = append(t.probes, op)
			idx = len(t.probes) - 1
		}
		if gi == 0 {
			op.comments = append(op.comments, t.pending...)
			op.comments = append(op.comments, p.Comments...)
			t.pending = nil
		}
		h := &handler{}
		if pk.exit {
			op.exit = h
		} else {
			op.entry = h
		}
		c := &ctx{t: t, op: op, h: h, exit: pk.exit, probe: idx, kind: pk.kind, family: fam, vars: map[string]*varVal{}, idents: map[string]hx{}, alias: map[string]string{}}
		if pk.kind == "tracepoint" {
			c.events = names
		}
		if p.Filter != nil {
			f := c.expr(p.Filter).boolean()
			if f.text != "true" {
				h.when = f.text
			}
		}
		c.stmts(p.Body)
		c.flush()
	}
}

// callsKaddr says whether the probe's filter or body calls kaddr.
func callsKaddr(p *Probe) bool {
	body := p.Body
	if p.Filter != nil {
		body = append([]Stmt{&ExprStmt{X: p.Filter}}, body...)
	}
	return callsFunc(body, "kaddr")
}

func list(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return "[" + strings.Join(items, ", ") + "]"
}

func quoteAll(s []string) []string {
	var out []string
	for _, v := range s {
		out = append(out, quote(v))
	}
	return out
}

func (t *translator) probeName(target string) string {
	if i := strings.LastIndex(target, ":"); i >= 0 {
		target = target[i+1:]
	}
	n := identName(strings.NewReplacer("*", "", "?", "", ".", "_").Replace(target))
	if n == "" {
		n = "probe"
	}
	name := n
	for i := 2; t.names[name]; i++ {
		name = fmt.Sprintf("%s_%d", n, i)
	}
	t.names[name] = true
	return name
}

// special translates BEGIN, END and interval probes: only what prints
// (bpftrace's header lines, the maps at the end), and the constants BEGIN
// stores into maps.
func (t *translator) special(p *Probe, fam string) {
	c := &ctx{t: t, family: fam, vars: map[string]*varVal{}, idents: map[string]hx{}, alias: map[string]string{}}
	if p.Filter != nil {
		t.fail(p.Filter.At(), "Unsupported filter on "+fam, "A filter on "+fam+" has no equivalent.")
	}
	switch fam {
	case "BEGIN":
		c.steps = &t.begin
	case "END":
		c.steps = &t.end
	case "interval":
		d, _ := time.ParseDuration(intervalOf(p.Attach[0].Text))
		t.intervals = append(t.intervals, Interval{Every: d})
		c.steps = &t.intervals[len(t.intervals)-1].Steps
	}
	c.stmts(p.Body)
	switch {
	case fam == "interval" && c.exited:
		if d, err := time.ParseDuration(intervalOf(p.Attach[0].Text)); err == nil && d > 0 && (t.stopAfter == 0 || d < t.stopAfter) {
			t.stopAfter = d
		}
		t.note("%s stopped bpftrace with exit(): probectl run -duration %s does.", p.Attach[0].Text, intervalOf(p.Attach[0].Text))
	case fam == "interval":
		t.note("%s printed the maps each interval: probectl run -interval %s prints what each interval added.", p.Attach[0].Text, intervalOf(p.Attach[0].Text))
	}
}

func intervalOf(text string) string {
	parts := strings.Split(text, ":")
	switch len(parts) {
	case 2:
		return parts[1]
	case 3:
		return parts[2] + parts[1]
	}
	return "1s"
}
