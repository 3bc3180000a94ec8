package bpf

// Binary is what a node published of a user binary for plans made
// elsewhere ("probectl plan -cluster"): what the compiler would have read
// from the file on that node.
type Binary struct {
	// Name is the binary as specs name it: a path, or a library name
	// resolved through the node's ld.so.cache.
	Name string `json:"name"`
	// Path is the file Name resolved to on the node ("" when it could not
	// be read).
	Path    string `json:"path,omitempty"`
	BuildID string `json:"build_id,omitempty"`
	// Functions are its function symbols, sorted; nil when the node's list
	// was too large to publish (Digest still says which list it was).
	Functions []string `json:"-"`
	// Digest is the sha256 of the function list, one name a line.
	Digest string `json:"digest,omitempty"`
	// Refused are the functions the kernel refuses uprobes on, with why.
	Refused map[string]string `json:"refused,omitempty"`
	// Error says why the node could not read the binary, or "".
	Error string `json:"error,omitempty"`
}

// Binaries are the user binaries a node published, by Name. A target
// whose facts hold them (Facts.Binaries not nil) is another machine: a
// binary missing from them is not checked, never read here.
type Binaries map[string]*Binary
