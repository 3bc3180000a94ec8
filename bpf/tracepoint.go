package bpf

import (
	"bufio"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// TracepointField is one field of a tracepoint's record.
type TracepointField struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Offset int    `json:"offset"`
	Size   int    `json:"size"`
	Signed bool   `json:"signed"`
}

// TracepointFormat is the record layout of one tracepoint event, as its
// tracefs format file gives it. Common fields (common_pid, ...) are left out.
type TracepointFormat struct {
	Event  string            `json:"event"`
	Fields []TracepointField `json:"fields"`
}

// Field returns the named field, or nil.
func (t *TracepointFormat) Field(name string) *TracepointField {
	for i := range t.Fields {
		if t.Fields[i].Name == name {
			return &t.Fields[i]
		}
	}
	return nil
}

// FieldNames lists the fields' names.
func (t *TracepointFormat) FieldNames() []string {
	names := make([]string, len(t.Fields))
	for i, f := range t.Fields {
		names[i] = f.Name
	}
	return names
}

// ParseTracepointFormat parses the text of a tracefs format file.
func ParseTracepointFormat(event, text string) (*TracepointFormat, error) {
	tp := &TracepointFormat{Event: event}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "field:") {
			continue
		}
		f, err := parseFieldLine(line)
		if err != nil {
			return nil, fmt.Errorf("tracepoint %s: %w", event, err)
		}
		if strings.HasPrefix(f.Name, "common_") {
			continue
		}
		tp.Fields = append(tp.Fields, f)
	}
	return tp, sc.Err()
}

// parseFieldLine parses "field:const char * filename;	offset:24;	size:8;	signed:0;".
func parseFieldLine(line string) (TracepointField, error) {
	var f TracepointField
	for _, part := range strings.Split(line, ";") {
		key, val, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			continue
		}
		switch key {
		case "field":
			decl := strings.TrimSpace(val)
			if i := strings.Index(decl, "["); i >= 0 { // arrays: "char comm[16]"
				decl = decl[:i]
			}
			i := strings.LastIndexAny(decl, " *")
			if i < 0 {
				return f, fmt.Errorf("field %q: no type", val)
			}
			f.Name = decl[i+1:]
			f.Type = strings.TrimSpace(strings.TrimSpace(val)[:i+1])
		case "offset", "size", "signed":
			n, err := strconv.Atoi(val)
			if err != nil {
				return f, fmt.Errorf("field %q: %s %q", f.Name, key, val)
			}
			switch key {
			case "offset":
				f.Offset = n
			case "size":
				f.Size = n
			default:
				f.Signed = n != 0
			}
		}
	}
	if f.Name == "" || f.Size == 0 {
		return f, fmt.Errorf("bad field line %q", line)
	}
	return f, nil
}

// ReadTracepointFormat reads "group:event"'s format from tracefs.
func ReadTracepointFormat(tracefs, event string) (*TracepointFormat, error) {
	group, name, ok := strings.Cut(event, ":")
	if !ok {
		return nil, fmt.Errorf("tracepoint %q: want GROUP:EVENT", event)
	}
	b, err := os.ReadFile(filepath.Join(tracefs, "events", group, name, "format"))
	if err != nil {
		return nil, err
	}
	return ParseTracepointFormat(event, string(b))
}

// syscallFormats holds the formats of the syscalls:* tracepoints, whose
// layout is part of the kernel ABI (the syscall number, then one 8-byte slot
// per argument, or the return value). Built-in profiles use them.
//
//go:embed syscalls.tp
var syscallFormats string

var (
	builtinOnce sync.Once
	builtinTPs  map[string]*TracepointFormat
)

func builtinTracepoint(event string) *TracepointFormat {
	builtinOnce.Do(func() {
		builtinTPs = map[string]*TracepointFormat{}
		for _, block := range strings.Split(syscallFormats, "\n\n") {
			name, body, _ := strings.Cut(strings.TrimSpace(block), "\n")
			if name == "" {
				continue
			}
			tp, err := ParseTracepointFormat(name, body)
			if err != nil {
				panic(err) // the embedded file is generated and tested
			}
			builtinTPs[name] = tp
		}
	})
	return builtinTPs[event]
}
