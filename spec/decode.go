package spec

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/probectl/probectl/bpf"
	"github.com/zclconf/go-cty/cty"
)

// LoadPaths reads spec files: each path is a file, or a directory whose
// *.hcl files are read (not recursively).
func LoadPaths(paths []string) (*Config, hcl.Diagnostics) {
	files := map[string][]byte{}
	var diags hcl.Diagnostics
	for _, p := range paths {
		names, err := expandPath(p)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError, Summary: "Cannot read spec path",
				Detail: fmt.Sprintf("%s. Give a .hcl file or a directory of them.", err),
			})
			continue
		}
		for _, name := range names {
			b, d := ReadFile(name)
			if d != nil {
				diags = append(diags, d)
				continue
			}
			files[name] = b
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	cfg, more := Parse(files)
	return cfg, append(diags, more...)
}

// ExpandPaths lists the spec files that paths name.
func ExpandPaths(paths []string) ([]string, error) {
	var all []string
	for _, p := range paths {
		names, err := expandPath(p)
		if err != nil {
			return nil, err
		}
		all = append(all, names...)
	}
	return all, nil
}

func expandPath(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	// Listed, not globbed: a directory's own name may hold glob
	// characters ("specs[1]" as a pattern would name "specs1").
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".hcl") {
			names = append(names, filepath.Join(p, e.Name()))
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no *.hcl files in the directory", p)
	}
	sort.Strings(names)
	return names, nil
}

// Parse decodes and checks spec files given by name and content. Tables
// are shared by every probe of the set, whichever file declares them.
func Parse(files map[string][]byte) (*Config, hcl.Diagnostics) { return parseSet(files, true) }

// parseSet is Parse; apart lets it decode a file's probes on every CPU
// (decodeApart).
func parseSet(files map[string][]byte, apart bool) (*Config, hcl.Diagnostics) {
	cfg := &Config{Sources: files}
	all, labels := tables{}, labelSets{}
	parsedFiles, diags := parseFiles(cfg, files, all, labels)
	// Labels after every table: a labels block may not take a table's name.
	var bodies []*hclsyntax.Body
	for _, pf := range parsedFiles {
		for _, b := range pf.labels {
			pf.dec.labelsBlock(b, labels, all)
		}
		bodies = append(bodies, pf.content)
	}
	inferTables(all, bodies)
	diags = append(diags, decodeProbes(cfg, parsedFiles, !apart || len(all) > 0 || len(labels) > 0)...)
	if !diags.HasErrors() {
		diags = append(diags, checkTables(all)...)
		diags = append(diags, checkEvents(cfg)...)
		diags = append(diags, checkLabels(labels)...)
	}
	for _, t := range all {
		cfg.Tables = append(cfg.Tables, t)
	}
	for _, ls := range labels {
		cfg.Labels = append(cfg.Labels, ls)
	}
	sort.Slice(cfg.Labels, func(i, j int) bool { return cfg.Labels[i].Name < cfg.Labels[j].Name })
	sort.Slice(cfg.Tables, func(i, j int) bool { return cfg.Tables[i].Name < cfg.Tables[j].Name })
	sort.Slice(cfg.Probes, func(i, j int) bool { return cfg.Probes[i].Addr.Less(cfg.Probes[j].Addr) })
	return cfg, diags
}

// parsedFile is one spec file parsed, its tables and event buffer
// decoded, its probe and labels blocks not yet.
type parsedFile struct {
	dec     *decoder
	probes  []*hcl.Block
	labels  []*hcl.Block
	content *hclsyntax.Body
	// reported are the file's syntax errors (bpftrace's ->), whose
	// ranges the decoder's errors do not report again.
	reported hcl.Diagnostics
}

// parseFiles parses the files in name order and decodes their tables and
// event buffers into all and cfg; files that cannot be decoded are left
// out.
func parseFiles(cfg *Config, files map[string][]byte, all tables, labels labelSets) ([]parsedFile, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var parsedFiles []parsedFile
	for _, name := range names {
		f, d := ParseFile(name, files[name])
		diags = append(diags, d...)
		if f == nil {
			continue
		}
		src := source(files[name])
		dec := &decoder{src: &src, tables: all, labels: labels, habits: d}
		content, cd := f.Body.Content(fileSchema)
		dec.diags = append(dec.diags, cd...)
		pf := parsedFile{dec: dec, content: f.Body.(*hclsyntax.Body), reported: d}
		for _, b := range content.Blocks {
			switch b.Type {
			case "table":
				dec.table(b, all)
			case "events":
				cfg.Events = dec.eventsBlock(b, cfg.Events)
			case "labels":
				pf.labels = append(pf.labels, b)
			default:
				pf.probes = append(pf.probes, b)
			}
		}
		parsedFiles = append(parsedFiles, pf)
	}
	return parsedFiles, diags
}

// decodeApartMin is the fewest probe blocks in a file worth decoding on
// every CPU.
const decodeApartMin = 64

// decodedProbe is a probe block decoded apart, with its diagnostics.
type decodedProbe struct {
	p     *Probe
	diags hcl.Diagnostics
}

// decodeApart decodes a file's probe blocks on every CPU, each with a
// decoder of its own (the file's, its diagnostics apart), in block order;
// nil — decode them in turn — for a file of few blocks, or with inTurn:
// when the spec set has tables or labels blocks (a probe's decoding
// counts its uses of them).
func decodeApart(pf parsedFile, inTurn bool) []decodedProbe {
	if inTurn || len(pf.probes) < decodeApartMin {
		return nil
	}
	out := make([]decodedProbe, len(pf.probes))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(goruntime.GOMAXPROCS(0), 8) {
		wg.Go(func() {
			for k := int(next.Add(1) - 1); k < len(pf.probes); k = int(next.Add(1) - 1) {
				dec := *pf.dec
				dec.diags = nil
				out[k].p = dec.probe(pf.probes[k])
				out[k].diags = dec.diags
			}
		})
	}
	wg.Wait()
	return out
}

// decodeProbes decodes every file's probes into cfg, refusing a second
// probe at an address, and returns each file's diagnostics.
func decodeProbes(cfg *Config, parsedFiles []parsedFile, inTurn bool) hcl.Diagnostics {
	var diags hcl.Diagnostics
	seen := map[bpf.Address]*Probe{}
	for _, pf := range parsedFiles {
		decoded := decodeApart(pf, inTurn)
		for i, b := range pf.probes {
			var p *Probe
			if decoded != nil {
				p = decoded[i].p
				pf.dec.diags = append(pf.dec.diags, decoded[i].diags...)
			} else {
				p = pf.dec.probe(b)
			}
			if p == nil {
				continue
			}
			if first, dup := seen[p.Addr]; dup {
				pf.dec.diags = append(pf.dec.diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Duplicate probe address",
					Detail: fmt.Sprintf("A probe %q is already declared at %s. Each probe needs its own address: rename one of them.",
						p.Addr, pos(first.DeclRange)),
					Subject: p.DeclRange.Ptr(),
				})
				continue
			}
			seen[p.Addr] = p
			cfg.Probes = append(cfg.Probes, p)
		}
		diags = append(diags, without(pf.dec.diags, pf.reported)...)
	}
	return diags
}

var fileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "probe", LabelNames: []string{"kind", "name"}},
		{Type: "table", LabelNames: []string{"name"}},
		{Type: "events"},
		{Type: "labels", LabelNames: []string{"name"}},
	},
}

// probeSchema has every probe attribute of every kind; decodeProbe then
// says which kind an attribute belongs to, a clearer answer than
// "unsupported argument".
var probeSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "functions"}, {Name: "exclude"}, {Name: "attach"}, {Name: "prefer"}, {Name: "entry_data_size"},
		{Name: "binary"}, {Name: "usdt"}, {Name: "pid"}, {Name: "event"}, {Name: "optional"}, {Name: "frequency"}, {Name: "period_ns"}, {Name: "period"}, {Name: "stack_entries"}, {Name: "one_cpu"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "on_entry"}, {Type: "on_exit"}},
}

var handlerSchema = func() *hcl.BodySchema {
	s := &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "when"}, {Name: "save"}}}
	for _, k := range ActionKinds {
		s.Blocks = append(s.Blocks, hcl.BlockHeaderSchema{Type: string(k), LabelNames: []string{"name"}})
	}
	return s
}()

var actionSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "value"}, {Name: "by"}, {Name: "when"}, {Name: "max_keys"},
		{Name: "min"}, {Name: "max"}, {Name: "step"}, {Name: "fields"},
		{Name: "unit"}, {Name: "export_stacks"},
	},
}

// kindAttrs says which probe attributes each kind takes, and which are
// required (a user probe needs functions or usdt: checkUser).
var kindAttrs = map[bpf.Kind]map[string]bool{
	bpf.KindKernel:     {"functions": true, "exclude": false, "attach": false, "prefer": false, "entry_data_size": false, "optional": false},
	bpf.KindUser:       {"binary": true, "functions": false, "usdt": false, "exclude": false, "attach": false, "entry_data_size": false, "pid": false, "optional": false},
	bpf.KindTracepoint: {"event": true, "attach": false, "optional": false},
	bpf.KindProfile:    {"frequency": false, "period_ns": false, "period": false, "event": false, "stack_entries": false, "one_cpu": false},
}

// Attach families a probe may insist on, by kind.
var attachFamilies = map[bpf.Kind][]string{
	bpf.KindKernel:     {"auto", "kprobe.multi", "kprobe.session", "fentry", "fsession", "kprobe"},
	bpf.KindUser:       {"auto", "uprobe.session", "uprobe.multi", "uprobe"},
	bpf.KindTracepoint: {"auto", "raw_tracepoint", "tp_btf", "tracepoint"},
}

type decoder struct {
	src    *source   // shared by the file's expressions
	tables tables    // the spec set's, shared by every file
	labels labelSets // likewise
	diags  hcl.Diagnostics
	// habits are the file's bpftrace habits read away (ParseFile): a
	// probe that holds one is not also said to do nothing.
	habits hcl.Diagnostics
}

func (d *decoder) errorf(rng hcl.Range, summary, detail string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(detail, args...), Subject: rng.Ptr(),
	})
}

func (d *decoder) warnf(rng hcl.Range, summary, detail string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagWarning, Summary: summary, Detail: fmt.Sprintf(detail, args...), Subject: rng.Ptr(),
	})
}

func (d *decoder) probe(b *hcl.Block) *Probe {
	p := d.probeAddress(b)
	if p == nil {
		return nil
	}
	content, diags := b.Body.Content(probeSchema)
	d.diags = append(d.diags, diags...)
	bodyOK := !diags.HasErrors() // a misspelt argument is not also a missing one
	d.probeArgs(p, content)
	d.checkRequired(p, b, content, bodyOK)
	if p.Addr.Kind == bpf.KindUser && bodyOK {
		d.checkUser(p, b, content)
	}
	if p.Addr.Kind == bpf.KindProfile && bodyOK {
		d.checkProfile(p, b, content)
	}
	d.handlers(p, content.Blocks)
	d.checkHandlers(p, b, content)
	d.checkActionNames(p)
	return p
}

// probeAddress checks a probe block's labels and starts its probe with
// the defaults of its kind; nil when a label is wrong.
func (d *decoder) probeAddress(b *hcl.Block) *Probe {
	kind, name := bpf.Kind(b.Labels[0]), b.Labels[1]
	if kind == "usdt" {
		d.errorf(b.LabelRanges[0], "Unknown probe kind",
			"A USDT probe is a user probe that names the probe: probe \"user\" %q { binary = \"/usr/bin/python3\", usdt = \"python:function__entry\" }.", name)
		return nil
	}
	if !kind.Valid() {
		d.errorf(b.LabelRanges[0], "Unknown probe kind",
			"%q is not a probe kind. Use \"kernel\" for kernel functions, \"user\" for functions in a binary, \"tracepoint\", or \"profile\" to sample every CPU.", kind)
		return nil
	}
	if !bpf.ValidName(name) {
		d.errorf(b.LabelRanges[1], "Invalid probe name",
			"%q is not a valid probe name. Use letters, digits and underscores, starting with a letter: for example \"vfs_latency\".", name)
		return nil
	}
	p := &Probe{Addr: bpf.Address{Kind: kind, Name: name}, DeclRange: b.DefRange, AttachRange: b.DefRange, Attach: "auto"}
	if body, ok := b.Body.(*hclsyntax.Body); ok {
		p.BodyRange = body.SrcRange
	}
	if kind == bpf.KindProfile {
		p.PerfEvent = "auto"
	}
	return p
}

// probeArgs decodes a probe's arguments, each by its decoder: those of
// profile probes by profileAttr, the others by probeArgDecoders.
func (d *decoder) probeArgs(p *Probe, content *hcl.BodyContent) {
	kind := p.Addr.Kind
	for attrName, attr := range content.Attributes {
		if _, ok := kindAttrs[kind][attrName]; !ok {
			d.errorf(attr.NameRange, "Argument not valid here",
				"%q is not an argument of %s probes (it belongs to %s). Remove it.", attrName, kind, kindsTaking(attrName))
			continue
		}
		if kind == bpf.KindProfile {
			d.profileAttr(p, attr)
			continue
		}
		probeArgDecoders[attrName](d, p, attr)
	}
	if p.Prefer != "" && p.Attach != "auto" && contains(attachFamilies[kind], p.Attach) {
		d.errorf(p.PreferRange, "Conflicting route settings",
			"prefer = %q asks probectl to choose the link family by its measured cost, and attach = %q names the family itself. Keep one: remove prefer, or set attach = \"auto\".", p.Prefer, p.Attach)
	}
}

// probeArgDecoders decode the arguments of kernel, user and tracepoint
// probes, by name; kindAttrs says which kind takes which.
var probeArgDecoders = map[string]func(*decoder, *Probe, *hcl.Attribute){
	"functions": func(d *decoder, p *Probe, attr *hcl.Attribute) {
		p.FunctionsRange = attr.Expr.Range()
		p.Functions = d.patterns(attr, false)
	},
	"exclude":         func(d *decoder, p *Probe, attr *hcl.Attribute) { p.Exclude = d.patterns(attr, true) },
	"attach":          (*decoder).attachArg,
	"prefer":          (*decoder).preferArg,
	"entry_data_size": (*decoder).entryDataArg,
	"binary":          (*decoder).binaryArg,
	"usdt":            (*decoder).usdtArg,
	"optional":        (*decoder).optionalArg,
	"pid": func(d *decoder, p *Probe, attr *hcl.Attribute) {
		if n, ok := d.intAttr(attr, 0, 1<<22); ok {
			p.PID = int(n)
		}
	},
	"event": func(d *decoder, p *Probe, attr *hcl.Attribute) {
		p.EventRange = attr.Expr.Range()
		p.Events = d.events(attr)
	},
}

func (d *decoder) attachArg(p *Probe, attr *hcl.Attribute) {
	p.AttachRange = attr.Expr.Range()
	s, ok := d.stringAttr(attr)
	if !ok {
		return
	}
	p.Attach = s
	if kind := p.Addr.Kind; !contains(attachFamilies[kind], s) {
		d.errorf(attr.Expr.Range(), "Unknown attach family",
			"%q is not an attach family for %s probes. Use one of: %s.", s, kind, quoteList(attachFamilies[kind]))
	}
}

func (d *decoder) preferArg(p *Probe, attr *hcl.Attribute) {
	p.PreferRange = attr.Expr.Range()
	s, ok := d.stringAttr(attr)
	if !ok {
		return
	}
	if s != PreferHits && s != PreferAttach {
		d.errorf(attr.Expr.Range(), "Unknown preference",
			"%q is not a preference. Use \"hits\" (the family cheapest per hit, for few hot functions: trampolines where the kernel has them) or \"attach\" (the family fastest to attach and detach, for many functions: kprobe.multi), chosen by the measured cost table for the target's kernel; or remove prefer for the usual rule.", s)
		return
	}
	p.Prefer = s
}

func (d *decoder) entryDataArg(p *Probe, attr *hcl.Attribute) {
	p.EntryDataSizeRange = attr.Expr.Range()
	if n, ok := d.intAttr(attr, 1, MaxEntryData); ok {
		p.EntryDataSize = int(n)
	}
}

func (d *decoder) binaryArg(p *Probe, attr *hcl.Attribute) {
	p.BinaryRange = attr.Expr.Range()
	s, ok := d.stringAttr(attr)
	if !ok {
		return
	}
	p.Binary = s
	switch {
	case strings.HasPrefix(s, "/"):
	case strings.Contains(s, "/"):
		d.errorf(attr.Expr.Range(), "Binary path must be absolute",
			"%q is relative; probes are attached by the kernel, which needs an absolute path such as \"/usr/bin/bash\" (or a library's name, such as \"libc\", found as the dynamic linker finds it).", s)
	case !validLibrary(s):
		d.errorf(attr.Expr.Range(), "Invalid library name",
			"%q is neither an absolute path nor a library name. Give a path such as \"/usr/bin/bash\", or a library as ld.so names it: \"libc\", \"libssl.so.3\".", s)
	}
}

// usdtArg decodes usdt = "provider:name", a USDT probe of the binary.
func (d *decoder) usdtArg(p *Probe, attr *hcl.Attribute) {
	p.USDTRange = attr.Expr.Range()
	s, ok := d.stringAttr(attr)
	if !ok {
		return
	}
	provider, name, ok := strings.Cut(s, ":")
	if !ok || !cIdentifier(provider) || !cIdentifier(name) {
		d.errorf(attr.Expr.Range(), "Invalid USDT probe name",
			"%q is not a USDT probe's name. Write it as \"provider:name\" (both C identifiers, as sys/sdt.h's DTRACE_PROBE(provider, name) makes them): for example \"python:function__entry\". readelf -n BINARY lists a binary's probes (NT_STAPSDT).", s)
		return
	}
	p.USDT = s
}

// cIdentifier reports whether s is a C identifier.
func cIdentifier(s string) bool {
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// checkUser reports a user probe that names neither functions nor a USDT
// probe, or both, and what a USDT probe cannot have: an exit (the probe
// is a point in the code, not a function), a session, exclude.
func (d *decoder) checkUser(p *Probe, b *hcl.Block, content *hcl.BodyContent) {
	_, funcs := content.Attributes["functions"]
	usdt, isUSDT := content.Attributes["usdt"]
	switch {
	case !funcs && !isUSDT:
		d.errorf(b.DefRange, "Missing required argument",
			"user probes need \"functions\" (the binary's functions to probe) or \"usdt\" (one of its USDT probes, \"provider:name\"). Add one to the probe block.")
		return
	case funcs && isUSDT:
		d.errorf(usdt.NameRange, "Conflicting arguments",
			"usdt = %q probes a USDT probe, and functions = [...] the binary's functions. Keep one: a probe block attaches one or the other.", p.USDT)
		return
	case !isUSDT:
		return
	}
	if ex, ok := content.Attributes["exclude"]; ok {
		d.errorf(ex.NameRange, "Argument not valid here", "exclude removes functions from functions = [...]; a usdt probe has none. Remove it.")
	}
	if p.Attach == "uprobe.session" {
		d.errorf(p.AttachRange, "Attach family not available",
			"A USDT probe has no exit, so no session: it is attached with one uprobe.multi link for all its sites, or one uprobe per site. Use attach = \"auto\", \"uprobe.multi\" or \"uprobe\".")
	}
	for _, hb := range content.Blocks {
		if hb.Type == "on_exit" {
			d.errorf(hb.DefRange, "USDT probes have no exit",
				"A USDT probe is a point in the program's code, not a function, so it has no on_exit. Move the actions into on_entry.")
		}
	}
}

func (d *decoder) optionalArg(p *Probe, attr *hcl.Attribute) {
	p.OptionalRange = attr.Expr.Range()
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() || v.IsNull() || v.Type() != cty.Bool {
		d.errorf(attr.Expr.Range(), "Expected true or false",
			"optional = true lets the other probes attach when what this one names is not on the target; the plan says so.")
		return
	}
	p.Optional = v.True()
}

// checkRequired reports the arguments p's kind needs that the block
// lacks, unless the body already had errors.
func (d *decoder) checkRequired(p *Probe, b *hcl.Block, content *hcl.BodyContent, bodyOK bool) {
	if !bodyOK {
		return
	}
	for attrName, required := range kindAttrs[p.Addr.Kind] {
		if _, ok := content.Attributes[attrName]; required && !ok {
			d.errorf(b.DefRange, "Missing required argument",
				"%s probes need %q. Add it to the probe block.", p.Addr.Kind, attrName)
		}
	}
}

// noExit says, for the kinds of probe that have no exit, why and what to
// do instead.
var noExit = map[bpf.Kind][2]string{
	bpf.KindTracepoint: {"Tracepoints have no exit", "A tracepoint fires once, so it has no on_exit. Move the actions into on_entry."},
	bpf.KindProfile:    {"Samples have no exit", "A profile probe runs once per sample, so it has no on_exit. Move the actions into on_entry."},
}

// handlers decodes a probe's on_entry and on_exit blocks, on_entry first:
// on_exit reads what it saves.
func (d *decoder) handlers(p *Probe, hbs []*hcl.Block) {
	blocks := append([]*hcl.Block(nil), hbs...)
	sort.SliceStable(blocks, func(i, j int) bool { return blocks[i].Type == "on_entry" && blocks[j].Type != "on_entry" })
	for _, hb := range blocks {
		exit := hb.Type == "on_exit"
		if why, ok := noExit[p.Addr.Kind]; exit && ok {
			d.errorf(hb.DefRange, why[0], "%s", why[1])
			continue
		}
		slot := &p.Entry
		if exit {
			slot = &p.Exit
		}
		if *slot != nil {
			d.errorf(hb.DefRange, "Duplicate handler",
				"This probe already has an %s block at %s. Merge the two blocks into one.", hb.Type, pos((*slot).DeclRange))
			continue
		}
		*slot = d.handler(p, hb, exit)
	}
}

// checkHandlers reports handlers that do nothing, a probe without any,
// and entry data that no exit reads or that is too small.
func (d *decoder) checkHandlers(p *Probe, b *hcl.Block, content *hcl.BodyContent) {
	// A bpftrace habit in the probe (reported) is what it was meant to do.
	habit := d.habitIn(b)
	for _, h := range []*Handler{p.Entry, p.Exit} {
		if idle(h, p) && !habit {
			d.errorf(h.DeclRange, "Handler does nothing", "Add an action to this block, such as count \"calls\" {}.")
		}
	}
	if len(content.Blocks) == 0 && !habit {
		d.errorf(b.DefRange, "Probe does nothing",
			"Add an on_entry block (or on_exit, for kernel and user probes) with at least one action, such as count \"calls\" {}.")
	}
	if p.Exit != nil {
		d.checkExit(p)
	} else if p.EntryDataSize > 0 {
		d.warnf(p.EntryDataSizeRange, "Entry data without an exit handler",
			"entry_data_size only matters when there is an on_exit block to read the data. Remove it.")
	}
}

// habitIn says a bpftrace habit was read away inside block b.
func (d *decoder) habitIn(b *hcl.Block) bool {
	body, ok := b.Body.(*hclsyntax.Body)
	if !ok {
		return false
	}
	for _, h := range d.habits {
		if h.Subject != nil && body.SrcRange.Overlaps(*h.Subject) {
			return true
		}
	}
	return false
}

// idle says p's handler h (nil: none) does nothing: no action, and not an
// on_entry whose when or save still serves on_exit.
func idle(h *Handler, p *Probe) bool {
	if h == nil || len(h.Actions) > 0 {
		return false
	}
	servesExit := !h.Exit && p.Exit != nil && (h.When != nil || h.Save != nil)
	return !servesExit
}

// MaxEntryData is the most entry data a probe can keep for its exit handler.
const MaxEntryData = 128

func (d *decoder) checkExit(p *Probe) {
	saved := p.SaveSize()
	if p.EntryDataSize > 0 && saved > p.EntryDataSize {
		d.errorf(p.EntryDataSizeRange, "Entry data too small",
			"on_entry saves %d bytes, more than entry_data_size = %d. Raise entry_data_size to %d or save less.",
			saved, p.EntryDataSize, saved)
	}
	if saved > MaxEntryData {
		d.errorf(p.Entry.DeclRange, "Too much entry data",
			"on_entry saves %d bytes; at most %d can be kept for on_exit. Save fewer values.", saved, MaxEntryData)
	}
}

func (d *decoder) checkActionNames(p *Probe) {
	seen := map[string]*Action{}
	for _, a := range p.Actions() {
		if !a.IsAggregation() && a.Kind != Event {
			continue // store and delete are named by their table
		}
		if first, dup := seen[a.Name]; dup {
			d.errorf(a.DeclRange, "Duplicate action name",
				"This probe already has an action named %q at %s. Action names are unique within a probe: rename one.",
				a.Name, pos(first.DeclRange))
			continue
		}
		seen[a.Name] = a
	}
}

func kindsTaking(attr string) string {
	var kinds []string
	for _, k := range bpf.Kinds {
		if _, ok := kindAttrs[k][attr]; ok {
			kinds = append(kinds, string(k))
		}
	}
	return strings.Join(kinds, " and ") + " probes"
}

func (d *decoder) handler(p *Probe, b *hcl.Block, exit bool) *Handler {
	h := &Handler{Exit: exit, DeclRange: b.DefRange}
	content, diags := b.Body.Content(handlerSchema)
	d.diags = append(d.diags, diags...)
	scope := &scope{probe: p, exit: exit, d: d}
	if attr, ok := content.Attributes["when"]; ok {
		h.When = scope.boolExpr(attr.Expr, "when")
	}
	if attr, ok := content.Attributes["save"]; ok {
		if exit {
			d.errorf(attr.NameRange, "save is only for on_entry",
				"on_exit runs last, so nothing can read what it saves. Move save into on_entry, and read it in on_exit as entry.NAME.")
		} else {
			h.Save = scope.fields(attr, "save")
		}
	}
	for _, ab := range content.Blocks {
		if a := d.action(scope, ab); a != nil {
			h.Actions = append(h.Actions, a)
		}
	}
	return h
}

func (d *decoder) action(sc *scope, b *hcl.Block) *Action {
	a := &Action{Kind: ActionKind(b.Type), Name: b.Labels[0], DeclRange: b.DefRange, MaxKeys: DefaultMaxKeys}
	if a.Kind == Store || a.Kind == Delete {
		return d.tableAction(sc, b, a)
	}
	if !bpf.ValidName(a.Name) {
		d.errorf(b.LabelRanges[0], "Invalid action name",
			"%q is not a valid name. Use letters, digits and underscores, starting with a letter: it becomes a metric name.", a.Name)
	}
	content, diags := b.Body.Content(actionSchema)
	d.diags = append(d.diags, diags...)
	bad := d.actionArgs(sc, a, content.Attributes)
	for _, req := range actionNeeds[a.Kind] {
		if _, ok := content.Attributes[req]; !ok {
			d.errorf(b.DefRange, "Missing required argument", "%s needs %q. Add it to the block.", a.Kind, req)
		}
	}
	if a.Kind == LHist && !bad {
		d.checkLHist(a, content.Attributes)
	}
	d.checkLabels(a)
	return a
}

// actionArgs decodes the arguments of an action, refusing those its kind
// does not take; true when an lhist bound was reported.
func (d *decoder) actionArgs(sc *scope, a *Action, attrs hcl.Attributes) (bad bool) {
	takes := actionTakes[a.Kind]
	for name, attr := range attrs {
		if !contains(takes, name) {
			hint := "Remove it."
			if name == "value" && a.Kind == Count {
				hint = "count counts calls; to add up a value use sum \"" + a.Name + "\" { value = ... }."
			}
			d.errorf(attr.NameRange, "Argument not valid here", "%s takes %s, not %q. %s", a.Kind, quoteList(takes), name, hint)
			continue
		}
		if !d.actionArg(sc, a, name, attr) {
			bad = true
		}
	}
	return bad
}

// actionTakes are the arguments each kind of action takes.
var actionTakes = map[ActionKind][]string{
	Count: {"by", "when", "max_keys", "export_stacks"},
	Sum:   {"value", "by", "when", "max_keys", "unit", "export_stacks"},
	Min:   {"value", "by", "when", "max_keys", "unit", "export_stacks"},
	Max:   {"value", "by", "when", "max_keys", "unit", "export_stacks"},
	Hist:  {"value", "by", "when", "max_keys", "unit", "export_stacks"},
	LHist: {"value", "by", "when", "max_keys", "min", "max", "step", "unit", "export_stacks"},
	Event: {"fields", "when"},
}

// actionNeeds are the arguments each kind of action needs.
var actionNeeds = map[ActionKind][]string{
	Sum: {"value"}, Min: {"value"}, Max: {"value"}, Hist: {"value"},
	LHist: {"value", "min", "max", "step"}, Event: {"fields"},
}

// actionArg decodes one argument of an action; false when an lhist bound
// is not a number in range (already reported).
func (d *decoder) actionArg(sc *scope, a *Action, name string, attr *hcl.Attribute) bool {
	switch name {
	case "value":
		a.Value = sc.intExpr(attr.Expr, "value")
	case "when":
		a.When = sc.boolExpr(attr.Expr, "when")
	case "by":
		a.By, a.ByNames = sc.keys(attr)
	case "max_keys":
		if n, ok := d.intAttr(attr, 1, 1<<20); ok {
			a.MaxKeys = int(n)
		}
	case "min", "max", "step":
		n, ok := d.intAttr(attr, -1<<62, 1<<62)
		if !ok {
			return false
		}
		*lhistBound(a, name) = n
	case "fields":
		a.Fields = sc.fields(attr, "fields")
	case "unit":
		d.unitAttr(a, attr)
	case "export_stacks":
		a.ExportStacks = d.boolAttr(attr)
	}
	return true
}

// unitAttr decodes an aggregation's unit: one of Units.
func (d *decoder) unitAttr(a *Action, attr *hcl.Attribute) {
	u, ok := d.stringAttr(attr)
	if !ok {
		return
	}
	if _, known := Units[u]; !known {
		d.errorf(attr.Expr.Range(), "Unknown unit", "unit is %q; use one of %s: a scrape serves the values in the base unit (seconds, bytes).", u, quoteList(UnitNames()))
		return
	}
	a.Unit = u
}

// boolAttr decodes a true or false literal.
func (d *decoder) boolAttr(attr *hcl.Attribute) bool {
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() || v.IsNull() || v.Type() != cty.Bool {
		d.errorf(attr.Expr.Range(), "Expected true or false", "%s takes true or false.", attr.Name)
		return false
	}
	return v.True()
}

// lhistBound is the field of a that the lhist argument name sets.
func lhistBound(a *Action, name string) *int64 {
	switch name {
	case "min":
		return &a.Min
	case "max":
		return &a.Max
	}
	return &a.Step
}

// checkLHist checks an lhist's bounds, when all three are given: a
// positive step, max above min, and not too many buckets.
func (d *decoder) checkLHist(a *Action, attrs map[string]*hcl.Attribute) {
	if attrs["step"] == nil || attrs["min"] == nil || attrs["max"] == nil {
		return
	}
	rng := attrs["step"].Expr.Range()
	switch {
	case a.Step <= 0:
		d.errorf(rng, "Invalid lhist step", "step must be positive. Set it to the width of one bucket.")
	case a.Max <= a.Min:
		d.errorf(attrs["max"].Expr.Range(), "Invalid lhist range", "max (%d) must be greater than min (%d).", a.Max, a.Min)
	case span(a.Min, a.Max)/uint64(a.Step) > MaxLinearBuckets:
		d.errorf(rng, "Too many lhist buckets",
			"(max - min) / step gives %d buckets; at most %d are allowed. Raise step.", span(a.Min, a.Max)/uint64(a.Step), MaxLinearBuckets)
	}
}

// MaxLinearBuckets bounds the buckets of an lhist: (max - min) / step, the
// whole buckets between min and max, is at most this; a last partial one,
// and the under and over buckets, come on top.
const MaxLinearBuckets = 1000

// span is hi - lo for hi > lo, which fits in a uint64 though not always
// in an int64.
func span(lo, hi int64) uint64 { return uint64(hi) - uint64(lo) }

func (d *decoder) patterns(attr *hcl.Attribute, allowEmpty bool) []Pattern {
	exprs, diags := hcl.ExprList(attr.Expr)
	if diags.HasErrors() {
		d.errorf(attr.Expr.Range(), "Expected a list of names",
			"%s is a list of function names or globs, for example [\"vfs_read\", \"ksys_*\"].", attr.Name)
		return nil
	}
	if len(exprs) == 0 && !allowEmpty {
		d.errorf(attr.Expr.Range(), "No functions", "List at least one function name or glob, for example [\"vfs_read\"].")
	}
	var out []Pattern
	for _, e := range exprs {
		e, optional := d.optionalPattern(e, attr.Name == "functions")
		if e == nil {
			continue
		}
		if s, ok := d.function(e); ok {
			out = append(out, Pattern{Text: s, Range: e.Range(), Optional: optional})
		}
	}
	return out
}

// function reads one function name or glob of a list.
func (d *decoder) function(e hcl.Expression) (string, bool) {
	s, ok := d.literalString(e)
	if !ok {
		d.errorf(e.Range(), "Expected a function name", "Each entry is a quoted name or glob, for example \"vfs_read\" or \"ksys_*\" (or optional(\"name\"), which may be missing).")
		return "", false
	}
	// '/' is allowed: Go's symbols have it ("github.com/x/y.F"), and
	// path.Match's * stops at it, as a Go package path wants.
	if _, err := path.Match(s, ""); err != nil || s == "" || strings.ContainsAny(s, " \t") {
		d.errorf(e.Range(), "Invalid function pattern",
			"%q is not a function name or glob. Use a name like \"vfs_read\", or *, ? and [...] as in \"ksys_*\".", s)
		return "", false
	}
	return s, true
}

// optionalPattern unwraps optional("name"): a function or event that may
// be missing on the target. allowed says whether the list takes it; nil
// is returned after an error.
func (d *decoder) optionalPattern(e hcl.Expression, allowed bool) (hcl.Expression, bool) {
	call, ok := e.(*hclsyntax.FunctionCallExpr)
	if !ok || call.Name != "optional" {
		return e, false
	}
	switch {
	case !allowed:
		d.errorf(call.Range(), "optional is for what is probed",
			"optional(...) marks a function or event that may be missing; exclude lists what to leave out, which may always be missing.")
		return nil, false
	case len(call.Args) != 1 || call.ExpandFinal:
		d.errorf(call.Range(), "Wrong number of arguments", "optional takes one name or glob: optional(\"vfs_fsync*\").")
		return nil, false
	}
	return call.Args[0], true
}

func (d *decoder) literalString(e hcl.Expression) (string, bool) {
	v, diags := e.Value(nil)
	if diags.HasErrors() || v.IsNull() || !v.IsKnown() || v.Type() != cty.String {
		return "", false
	}
	return v.AsString(), true
}

func (d *decoder) stringAttr(attr *hcl.Attribute) (string, bool) {
	s, ok := d.literalString(attr.Expr)
	if !ok {
		d.errorf(attr.Expr.Range(), "Expected a string", "%s takes a quoted string literal.", attr.Name)
	}
	return s, ok
}

func (d *decoder) intAttr(attr *hcl.Attribute, lo, hi int64) (int64, bool) {
	bf, ok := hexAttr(attr.Expr)
	if !ok {
		v, diags := attr.Expr.Value(nil)
		if diags.HasErrors() || v.IsNull() || v.Type() != cty.Number {
			d.errorf(attr.Expr.Range(), "Expected a number", "%s takes a whole number literal (or hex(\"0x40\")).", attr.Name)
			return 0, false
		}
		bf = v.AsBigFloat()
	}
	n, acc := bf.Int64()
	if !bf.IsInt() {
		d.errorf(attr.Expr.Range(), "Not a whole number", "%s takes a whole number; %s is not one.", attr.Name, bf.Text('g', -1))
		return 0, false
	}
	if acc != 0 || n < lo || n > hi {
		d.errorf(attr.Expr.Range(), "Number out of range", "%s is %s, and must be from %s to %s.", attr.Name, bf.Text('f', 0), bound(lo), bound(hi))
		return 0, false
	}
	return n, true
}

// bound writes a limit, as a power of two when it is one.
func bound(n int64) string {
	for _, p := range []uint{62, 30, 22, 20} {
		switch n {
		case 1 << p:
			return fmt.Sprintf("%d (2^%d)", n, p)
		case -1 << p:
			return fmt.Sprintf("%d (-2^%d)", n, p)
		}
	}
	return fmt.Sprint(n)
}

// validLibrary reports whether s can be a library's name as the dynamic
// linker's cache lists it: libc, libssl.so.3, libstdc++.so.6.
func validLibrary(s string) bool {
	if s == "" || len(s) > 255 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-+", c) >= 0) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// pos writes where a range starts, as FILE:LINE:COL.
func pos(r hcl.Range) string {
	return fmt.Sprintf("%s:%d:%d", r.Filename, r.Start.Line, r.Start.Column)
}

// events decodes a tracepoint probe's event: one "GROUP:EVENT" or a list,
// each name or glob ("syscalls:sys_enter_exec*").
func (d *decoder) events(attr *hcl.Attribute) []Pattern {
	exprs, diags := hcl.ExprList(attr.Expr)
	if diags.HasErrors() {
		exprs = []hcl.Expression{attr.Expr}
	}
	if len(exprs) == 0 {
		d.errorf(attr.Expr.Range(), "No events", "List at least one event, for example \"syscalls:sys_enter_openat\".")
	}
	var out []Pattern
	for _, e := range exprs {
		e, optional := d.optionalPattern(e, true)
		if e == nil {
			continue
		}
		if s, ok := d.event(e); ok {
			out = append(out, Pattern{Text: s, Range: e.Range(), Optional: optional})
		}
	}
	return out
}

// event reads one event of a tracepoint probe: a quoted "GROUP:EVENT" or
// glob, with no probe type before it and no comma in it.
func (d *decoder) event(e hcl.Expression) (string, bool) {
	s, ok := d.literalString(e)
	if !ok {
		d.errorf(e.Range(), "Expected an event name", "Each event is a quoted \"GROUP:EVENT\" or a glob, for example \"syscalls:sys_enter_exec*\" (or optional(\"GROUP:EVENT\"), which may be missing).")
		return "", false
	}
	if group, rest, ok := strings.Cut(s, ":"); ok && (group == "tracepoint" || group == "t") && strings.Contains(rest, ":") {
		d.errorf(e.Range(), "Probe type in the event",
			"%q starts with bpftrace's probe type; here the probe's kind says it is a tracepoint, and event is only \"GROUP:EVENT\": write %q.", s, rest)
		return "", false
	}
	if parts := strings.Split(s, ","); len(parts) > 1 {
		for i, part := range parts {
			parts[i] = strconv.Quote(strings.TrimSpace(part))
		}
		d.errorf(e.Range(), "Several events in one string",
			"event takes a list for several events, one string each: event = [%s]. A glob matches several too (\"syscalls:sys_enter_open*\").", strings.Join(parts, ", "))
		return "", false
	}
	if err := bpf.CheckEventPattern(s); err != nil {
		d.errorf(e.Range(), "Invalid tracepoint event",
			"This is not a tracepoint: %s. Write the event as \"GROUP:EVENT\", for example \"syscalls:sys_enter_openat\", or a glob such as \"syscalls:sys_enter_exec*\"; the events are listed under /sys/kernel/tracing/events.", err)
		return "", false
	}
	return s, true
}
