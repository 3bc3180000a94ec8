package compiled

import "github.com/probectl/probectl/bpf"

// Table is a compiled table: state the probes of a spec set share, a hash
// map (not per-CPU: one probe stores, another reads) with its layout, and a
// per-CPU counter of the stores it could not take (full).
type Table struct {
	Address bpf.Address `json:"address"`
	// Key locates the key's parts; Value the value's fields (one, named
	// "value", for a table of single values).
	Key       []KeyField `json:"key"`
	KeySize   int        `json:"key_size"`
	Value     []KeyField `json:"value"`
	ValueSize int        `json:"value_size"`
	Objects   bool       `json:"objects,omitempty"`
	MaxKeys   int        `json:"max_keys"`
	Maps      []*Map     `json:"maps"`
	Digest    string     `json:"digest"`
}

// Refs of a table's own maps, in its pin directory.
const (
	TableData  = "data"
	TableStats = "stats"
)
