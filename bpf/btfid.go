package bpf

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
)

// BTFIdentity identifies a kernel's BTF without carrying it: the sha256
// of the raw vmlinux BTF and its size. Two kernels with the same identity
// have the same types and field offsets.
type BTFIdentity struct {
	SHA256 string
	Size   int64
}

// LiveBTFIdentity reads the running kernel's identity from VmlinuxBTF.
func LiveBTFIdentity() (BTFIdentity, error) {
	f, err := os.Open(VmlinuxBTF)
	if err != nil {
		return BTFIdentity{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, MaxKernelBTF+1))
	if err != nil {
		return BTFIdentity{}, err
	}
	return BTFIdentity{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}
