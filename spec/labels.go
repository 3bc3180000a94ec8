package spec

import "strings"

// ByLabels are the metric labels of the action's by columns, in order
// (README, "Serve"): a column named in a by object keeps its name, letters,
// digits and '_' (anything else becomes '_'); an unnamed one is named for
// what it means: a variable, args.NAME (args_NAME) and entry.NAME
// (entry_NAME) by their names, kstack and ustack as such, a decoder by its
// meaning (errno_name(x) is errno, signal_name signal, syscall_name
// syscall, ksym, usym, inet, inet6, cgroup_path cgroup, labels(NAME, x)
// NAME), a conversion (str, u8..s64, bswap, hex) by its argument's label,
// anything else by its text, each run of other characters one '_'.
func ByLabels(a *Action) []string {
	out := make([]string, len(a.By))
	for i, x := range a.By {
		if a.ByNames != nil {
			out[i] = LabelChars(a.ByNames[i])
		} else {
			out[i] = exprLabel(x)
		}
	}
	return out
}

// exprLabel is the label an unnamed by column means.
func exprLabel(x Expr) string {
	switch x := x.(type) {
	case *Var:
		return LabelChars(x.Name)
	case *EntryRef:
		return "entry_" + LabelChars(x.Name)
	case *ArgsField:
		return "args_" + LabelChars(x.Name)
	case *Stack:
		if x.User {
			return "ustack"
		}
		return "kstack"
	case *Str:
		return exprLabel(x.X)
	case *Buf:
		return exprLabel(x.X)
	case *IntCast:
		return exprLabel(x.X)
	case *ByteSwap:
		return exprLabel(x.X)
	case *Display:
		switch x.Decoder {
		case DecodeHex:
			return exprLabel(x.X)
		case DecodeLabels:
			return LabelChars(x.Labels.Name)
		}
		return string(x.Decoder)
	}
	return textLabel(x.Text())
}

// textLabel is text's letters, digits and '_', each run of other
// characters one '_', none at either end; "key" when nothing is left.
func textLabel(text string) string {
	parts := strings.FieldsFunc(text, func(c rune) bool { return !isLabelChar(c) })
	if len(parts) == 0 {
		return "key"
	}
	return strings.Join(parts, "_")
}

// LabelChars turns every character that is not an ASCII letter, digit or
// '_' into '_', and puts '_' before a leading digit.
func LabelChars(s string) string {
	s = strings.Map(func(c rune) rune {
		if isLabelChar(c) {
			return c
		}
		return '_'
	}, s)
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return "_" + s
	}
	return s
}

func isLabelChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// checkLabels reports two by columns of one action that would be served
// under one label, or a label Prometheus reserves.
func (d *decoder) checkLabels(a *Action) {
	seen := map[string]int{}
	for i, l := range ByLabels(a) {
		rng := a.By[i].Range()
		if strings.HasPrefix(l, "__") {
			d.errorf(rng, "Reserved label name", "This column would be the label %q, and Prometheus reserves names that start with \"__\". Name it: by = { NAME = ... }.", l)
		}
		if j, ok := seen[l]; ok {
			d.errorf(rng, "Label names meet",
				"by columns %d (%s) and %d (%s) would both be the label %q. Name them: by = { NAME = %s, ... }.",
				j+1, a.By[j].Text(), i+1, a.By[i].Text(), l, a.By[i].Text())
			continue
		}
		seen[l] = i
	}
}
