package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// captureTracepoints boots each kernel with cmd/vmexec/tpcapture as the
// payload and writes what it prints, the kernel's tracepoint formats, to
// dir/KERNEL.tp.gz: the captures that the built-in profiles embed (bpf's
// tracepoints/). A file whose capture is unchanged (its first line, the
// kernel's uname, aside) is left as it is.
func captureTracepoints(dir string, names []string) error {
	if len(names) == 0 {
		names = kernelNames()
	}
	tmp, err := os.MkdirTemp("", "vmexec-tp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, name := range names {
		k, err := kernelByName(name)
		if err != nil {
			return err
		}
		payload, err := build("vmexec/tpcapture", k.Arch, filepath.Join(tmp, "tpcapture-"+k.Arch))
		if err != nil {
			return err
		}
		var c console
		code, err := runVM(k, payload, nil, c.line)
		if err != nil {
			return fmt.Errorf("%s: %w", k.Name, err)
		}
		if code != 0 {
			return fmt.Errorf("%s: tpcapture exited with %d; see the console above", k.Name, code)
		}
		capture, err := c.capture()
		if err != nil {
			return fmt.Errorf("%s: %w", k.Name, err)
		}
		path := filepath.Join(dir, k.Name+".tp.gz")
		what, err := writeCapture(path, capture)
		if err != nil {
			return fmt.Errorf("%s: %w", k.Name, err)
		}
		events := bytes.Count(capture, []byte("\n\n")) + 1
		st, _ := os.Stat(path)
		fmt.Fprintf(os.Stderr, "vmexec: %s: %d events, %d KiB, %d KiB gzipped: %s %s\n",
			k.Name, events, len(capture)/1024, st.Size()/1024, what, path)
	}
	return nil
}

// console collects tpcapture's lines from the console.
type console struct {
	begun, ended bool
	b64          strings.Builder
	sum          string
	size         int
}

func (c *console) line(line string) bool {
	// The first line may follow the firmware's escape sequences.
	if i := strings.Index(line, "PROBECTL-TP"); i > 0 && !c.begun {
		line = line[i:]
	}
	switch {
	case line == "PROBECTL-TP-BEGIN":
		c.begun = true
	case strings.HasPrefix(line, "PROBECTL-TP "):
		c.b64.WriteString(strings.TrimPrefix(line, "PROBECTL-TP "))
	case strings.HasPrefix(line, "PROBECTL-TP-END "):
		f := strings.Fields(strings.TrimPrefix(line, "PROBECTL-TP-END "))
		if len(f) == 2 {
			c.sum = f[0]
			c.size, _ = strconv.Atoi(f[1])
		}
		c.ended = true
	default:
		return false
	}
	return true
}

// capture decodes what tpcapture printed, and checks it against its
// checksum: a kernel message written into the middle of a line damages it.
func (c *console) capture() ([]byte, error) {
	if !c.begun || !c.ended {
		return nil, errors.New("no capture on the console")
	}
	gz, err := base64.StdEncoding.DecodeString(c.b64.String())
	if err != nil {
		return nil, fmt.Errorf("the capture on the console is damaged (run again): %w", err)
	}
	capture, err := gunzip(gz)
	if err != nil {
		return nil, fmt.Errorf("the capture on the console is damaged (run again): %w", err)
	}
	if fmt.Sprintf("%x", sha256.Sum256(capture)) != c.sum || len(capture) != c.size {
		return nil, errors.New("the capture on the console is damaged (run again): its checksum differs")
	}
	return capture, nil
}

// writeCapture writes capture, gzipped as bpf.Gzip does, to path, unless
// path holds it already, the first line aside.
func writeCapture(path string, capture []byte) (string, error) {
	if old, err := os.ReadFile(path); err == nil {
		if prev, err := gunzip(old); err == nil && bytes.Equal(body(prev), body(capture)) {
			return "unchanged", nil
		}
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write(capture)
	if err := zw.Close(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(path+".tmp", b.Bytes(), 0o644); err != nil {
		return "", err
	}
	return "wrote", os.Rename(path+".tmp", path)
}

// body is a capture without its first line (the kernel's uname).
func body(capture []byte) []byte {
	if bytes.HasPrefix(capture, []byte("#")) {
		if i := bytes.IndexByte(capture, '\n'); i >= 0 {
			return capture[i+1:]
		}
	}
	return capture
}

func gunzip(gz []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(zr, 64<<20))
}
