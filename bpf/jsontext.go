package bpf

import (
	"bytes"
	"encoding/json"
)

// JSON is v as probectl writes JSON everywhere (event lines, -json
// views, state): as encoding/json writes it, but with '<', '>' and '&'
// as themselves. encoding/json escapes them (\u003e) for HTML pages,
// which a JSON line is not: `jq` users grep for "pid > 1".
func JSON(v any) ([]byte, error) { return JSONIndent(v, "") }

// JSONIndent is JSON indented by indent per level ("": one line).
func JSONIndent(v any, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
