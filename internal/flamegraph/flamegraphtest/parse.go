package flamegraphtest

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Namespace is the namespace of a flame graph's own attributes (fg:s,
// fg:n, fg:d and the <svg>'s fg:total).
const Namespace = "urn:probectl:flamegraph"

// Rect is one frame of a flame graph SVG, as Parse reads it.
type Rect struct {
	Name    string // the frame's name, from its <title>
	Title   string // the whole <title>: "NAME (N samples, P%)"
	Samples int64  // fg:n
	Start   int64  // fg:s: samples to its left
	Depth   int    // fg:d: 0 for the root ("all")
	X       float64
	Width   float64
	Fill    string
	Label   string // the <text> shown on it
}

// Doc is what Parse reads besides the frames.
type Doc struct {
	Frames []Rect
	Total  int64             // fg:total of the <svg>
	Height int               // the <svg>'s height in pixels
	Texts  map[string]string // the text of each <text> with an id
	Script string            // the <script>'s text
}

// Parse reads an SVG written by flamegraph.Write with encoding/xml
// (strict): the frames in document order, and the document's other texts.
// It fails on anything flamegraph.Write does not write: an element it does
// not use, an event handler attribute, a second script.
func Parse(r io.Reader) (*Doc, error) {
	d := xml.NewDecoder(r)
	p := &parser{doc: &Doc{Texts: map[string]string{}}}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			err = p.start(tok)
		case xml.CharData:
			p.text.Write(tok)
		case xml.EndElement:
			err = p.end()
		case xml.ProcInst, xml.Comment, xml.Directive:
			if pi, ok := tok.(xml.ProcInst); !ok || pi.Target != "xml" {
				err = fmt.Errorf("unexpected %T", tok)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if p.scripts != 1 {
		return nil, fmt.Errorf("%d scripts", p.scripts)
	}
	return p.doc, nil
}

const svgNS = "http://www.w3.org/2000/svg"

// allowed are the elements a flame graph has.
var allowed = map[string]bool{"svg": true, "title": true, "desc": true, "style": true, "script": true, "rect": true, "text": true, "g": true}

// parser is Parse's state: the open elements (each with its id), the
// frame being read and the text since the last element began or ended.
type parser struct {
	doc     *Doc
	stack   []xml.StartElement
	cur     *Rect
	text    strings.Builder
	scripts int
}

// start opens an element: an allowed one, without event handlers or
// links.
func (p *parser) start(tok xml.StartElement) error {
	if tok.Name.Space != svgNS || !allowed[tok.Name.Local] {
		return fmt.Errorf("element %s:%s", tok.Name.Space, tok.Name.Local)
	}
	attr, err := attributes(tok)
	if err != nil {
		return err
	}
	if len(p.stack) == 0 {
		if tok.Name.Local != "svg" {
			return fmt.Errorf("root element %s", tok.Name.Local)
		}
		p.doc.Total, _ = strconv.ParseInt(attr["fg:total"], 10, 64)
		p.doc.Height, _ = strconv.Atoi(attr["height"])
	}
	switch tok.Name.Local {
	case "script":
		p.scripts++
	case "g":
		err = p.frame(attr)
	case "rect":
		err = p.rect(attr)
	}
	p.stack = append(p.stack, xml.StartElement{Name: tok.Name, Attr: []xml.Attr{{Name: xml.Name{Local: "id"}, Value: attr["id"]}}})
	p.text.Reset()
	return err
}

// attributes are an element's attributes by name, the flame graph's own
// as "fg:NAME".
func attributes(tok xml.StartElement) (map[string]string, error) {
	attr := map[string]string{}
	for _, a := range tok.Attr {
		if strings.HasPrefix(strings.ToLower(a.Name.Local), "on") || strings.Contains(strings.ToLower(a.Name.Local), "href") {
			return nil, fmt.Errorf("<%s> has the attribute %s", tok.Name.Local, a.Name.Local)
		}
		key := a.Name.Local
		if a.Name.Space == Namespace {
			key = "fg:" + key
		}
		attr[key] = a.Value
	}
	return attr, nil
}

// frame begins a frame at a <g class="f">.
func (p *parser) frame(attr map[string]string) error {
	if attr["class"] != "f" {
		return nil
	}
	if p.cur != nil {
		return errors.New("a frame inside a frame")
	}
	p.cur = &Rect{}
	var err1, err2, err3 error
	p.cur.Start, err1 = strconv.ParseInt(attr["fg:s"], 10, 64)
	p.cur.Samples, err2 = strconv.ParseInt(attr["fg:n"], 10, 64)
	p.cur.Depth, err3 = strconv.Atoi(attr["fg:d"])
	if err := errors.Join(err1, err2, err3); err != nil {
		return fmt.Errorf("frame attributes: %w", err)
	}
	return nil
}

// rect reads a frame's box.
func (p *parser) rect(attr map[string]string) error {
	if p.cur == nil {
		return nil
	}
	var err1, err2 error
	p.cur.X, err1 = strconv.ParseFloat(attr["x"], 64)
	p.cur.Width, err2 = strconv.ParseFloat(attr["width"], 64)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("frame rect: %w", err)
	}
	p.cur.Fill = attr["fill"]
	return nil
}

// end closes the innermost element, keeping its text where it belongs.
func (p *parser) end() error {
	top := p.stack[len(p.stack)-1]
	p.stack = p.stack[:len(p.stack)-1]
	s := p.text.String()
	p.text.Reset()
	switch top.Name.Local {
	case "script":
		p.doc.Script = s
	case "title":
		if p.cur != nil {
			p.cur.Title = s
			i := strings.LastIndex(s, " (")
			if i < 0 {
				return fmt.Errorf("frame title %q", s)
			}
			p.cur.Name = s[:i]
		}
	case "text":
		if p.cur != nil {
			p.cur.Label = s
		} else if id := top.Attr[0].Value; id != "" {
			p.doc.Texts[id] = s
		}
	case "g":
		if p.cur != nil {
			p.doc.Frames = append(p.doc.Frames, *p.cur)
			p.cur = nil
		}
	}
	return nil
}
