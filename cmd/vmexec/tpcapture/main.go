// Command tpcapture is the payload that vmexec -tracepoints boots in each
// kernel of the matrix: it prints the running kernel's tracepoint formats
// ([bpf.CaptureTracepoints], headed by the kernel's uname) on the console,
// gzipped, in base64 lines between markers, with the SHA-256 of the
// capture so that vmexec can tell a damaged console stream from a capture.
//
//	PROBECTL-TP-BEGIN
//	PROBECTL-TP H4sIAAAAAAAC/+y9...
//	PROBECTL-TP-END SHA256 LENGTH
//
// vmexec builds it statically for the VM's architecture; it never runs on
// a host.
package main

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"

	"github.com/probectl/probectl/bpf"
	"golang.org/x/sys/unix"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "tpcapture: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return err
	}
	dir, err := bpf.Tracefs()
	if err != nil {
		return err
	}
	body, err := bpf.CaptureTracepoints(dir)
	if err != nil {
		return err
	}
	capture := append([]byte(fmt.Sprintf("# Linux %s %s %s\n", unix.ByteSliceToString(uts.Release[:]),
		unix.ByteSliceToString(uts.Version[:]), unix.ByteSliceToString(uts.Machine[:]))), body...)
	enc := base64.StdEncoding.EncodeToString(bpf.Gzip(capture))
	fmt.Println("PROBECTL-TP-BEGIN")
	for len(enc) > 0 {
		n := min(len(enc), 76)
		fmt.Println("PROBECTL-TP " + enc[:n])
		enc = enc[n:]
	}
	fmt.Printf("PROBECTL-TP-END %x %d\n", sha256.Sum256(capture), len(capture))
	return nil
}
