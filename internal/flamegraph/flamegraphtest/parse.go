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

// Parse reads an SVG written by flamegraph.Write with
// encoding/xml (strict): the frames in document order, and the document's
// other texts. It fails on anything flamegraph.Write does not write: an
// element it does not use, an event handler attribute, a second script.
func Parse(r io.Reader) (*Doc, error) {
	const svgNS = "http://www.w3.org/2000/svg"
	allowed := map[string]bool{"svg": true, "title": true, "desc": true, "style": true, "script": true, "rect": true, "text": true, "g": true}
	d := xml.NewDecoder(r)
	doc := &Doc{Texts: map[string]string{}}
	var stack []xml.StartElement
	var cur *Rect
	var text strings.Builder
	scripts := 0
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
			if tok.Name.Space != svgNS || !allowed[tok.Name.Local] {
				return nil, fmt.Errorf("element %s:%s", tok.Name.Space, tok.Name.Local)
			}
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
			if len(stack) == 0 {
				if tok.Name.Local != "svg" {
					return nil, fmt.Errorf("root element %s", tok.Name.Local)
				}
				doc.Total, _ = strconv.ParseInt(attr["fg:total"], 10, 64)
				doc.Height, _ = strconv.Atoi(attr["height"])
			}
			switch tok.Name.Local {
			case "script":
				scripts++
			case "g":
				if attr["class"] == "f" {
					if cur != nil {
						return nil, errors.New("a frame inside a frame")
					}
					cur = &Rect{}
					var err1, err2, err3 error
					cur.Start, err1 = strconv.ParseInt(attr["fg:s"], 10, 64)
					cur.Samples, err2 = strconv.ParseInt(attr["fg:n"], 10, 64)
					cur.Depth, err3 = strconv.Atoi(attr["fg:d"])
					if err := errors.Join(err1, err2, err3); err != nil {
						return nil, fmt.Errorf("frame attributes: %w", err)
					}
				}
			case "rect":
				if cur != nil {
					var err1, err2 error
					cur.X, err1 = strconv.ParseFloat(attr["x"], 64)
					cur.Width, err2 = strconv.ParseFloat(attr["width"], 64)
					if err := errors.Join(err1, err2); err != nil {
						return nil, fmt.Errorf("frame rect: %w", err)
					}
					cur.Fill = attr["fill"]
				}
			}
			stack = append(stack, xml.StartElement{Name: tok.Name, Attr: []xml.Attr{{Name: xml.Name{Local: "id"}, Value: attr["id"]}}})
			text.Reset()
		case xml.CharData:
			text.Write(tok)
		case xml.EndElement:
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			s := text.String()
			text.Reset()
			switch top.Name.Local {
			case "script":
				doc.Script = s
			case "title":
				if cur != nil {
					cur.Title = s
					i := strings.LastIndex(s, " (")
					if i < 0 {
						return nil, fmt.Errorf("frame title %q", s)
					}
					cur.Name = s[:i]
				}
			case "text":
				if cur != nil {
					cur.Label = s
				} else if id := top.Attr[0].Value; id != "" {
					doc.Texts[id] = s
				}
			case "g":
				if cur != nil {
					doc.Frames = append(doc.Frames, *cur)
					cur = nil
				}
			}
		case xml.ProcInst, xml.Comment, xml.Directive:
			if pi, ok := tok.(xml.ProcInst); ok && pi.Target == "xml" {
				continue
			}
			return nil, fmt.Errorf("unexpected %T", tok)
		}
	}
	if scripts != 1 {
		return nil, fmt.Errorf("%d scripts", scripts)
	}
	return doc, nil
}
