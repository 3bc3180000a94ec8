package kubetest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"time"
)

// ImageFile is a file of an image built by WriteOCIArchive.
type ImageFile struct {
	// Path is where it is in the image, without the leading slash.
	Path string
	// Source is the host file copied there.
	Source string
	// Mode is its mode (0o755 for a binary).
	Mode int64
}

// WriteOCIArchive writes an OCI image archive (an OCI layout in a tar,
// what `ctr images import` and `docker load` read) named ref, with one
// uncompressed layer holding files and the entrypoint given.
func WriteOCIArchive(path, ref string, entrypoint []string, files ...ImageFile) error {
	layer, err := imageLayer(files)
	if err != nil {
		return err
	}
	layerDesc := blobDesc("application/vnd.oci.image.layer.v1.tar", layer)
	config, _ := json.Marshal(map[string]any{
		"architecture": goruntime.GOARCH, "os": "linux",
		"config": map[string]any{"Entrypoint": entrypoint, "Env": []string{"PATH=/usr/local/bin:/usr/bin:/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDesc["digest"].(string)}},
	})
	configDesc := blobDesc("application/vnd.oci.image.config.v1+json", config)
	manifest, _ := json.Marshal(map[string]any{"schemaVersion": 2,
		"mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config":    configDesc, "layers": []any{layerDesc}})
	manifestDesc := blobDesc("application/vnd.oci.image.manifest.v1+json", manifest)
	manifestDesc["platform"] = map[string]string{"architecture": goruntime.GOARCH, "os": "linux"}
	manifestDesc["annotations"] = map[string]string{"io.containerd.image.name": ref, "org.opencontainers.image.ref.name": ref}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2,
		"mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []any{manifestDesc}})

	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", index},
		{blobPath(layer), layer}, {blobPath(config), config}, {blobPath(manifest), manifest},
	}
	for _, e := range entries {
		if err := writeTarFile(tw, e.name, 0o644, e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// imageLayer is a tar of files, with the directories they are in and an
// empty /tmp.
func imageLayer(files []ImageFile) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	dirs := map[string]bool{}
	addDir := func(d string) error {
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: time.Unix(0, 0)})
	}
	if err := addDir("tmp"); err != nil {
		return nil, err
	}
	for _, f := range files {
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, err
		}
		var parents []string
		for d := filepath.Dir(f.Path); d != "." && !dirs[d]; d = filepath.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if err := addDir(d); err != nil {
				return nil, err
			}
		}
		if err := writeTarFile(tw, f.Path, f.Mode, data); err != nil {
			return nil, err
		}
	}
	err := tw.Close()
	return b.Bytes(), err
}

func writeTarFile(tw *tar.Writer, name string, mode int64, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func digest(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

func blobPath(b []byte) string { return fmt.Sprintf("blobs/sha256/%x", sha256.Sum256(b)) }

func blobDesc(mediaType string, b []byte) map[string]any {
	return map[string]any{"mediaType": mediaType, "digest": digest(b), "size": len(b)}
}

// ImportImage imports an image archive (WriteOCIArchive's) into the
// node's containerd, where the kubelet finds it without pulling.
func (n *Node) ImportImage(archive string) error {
	return n.ctr("images", "import", archive)
}

// pauseC is the pod sandbox's process: it waits for a signal to end.
const pauseC = `#include <signal.h>
#include <unistd.h>
#include <stdlib.h>
static void die(int s) { (void)s; _exit(0); }
int main(void) {
	signal(SIGINT, die);
	signal(SIGTERM, die);
	for (;;) pause();
}
`

// importPause builds the pause image (a static C program, gcc -static)
// and imports it as PauseImage.
func (n *Node) importPause() error {
	src := filepath.Join(n.Dir, "pause.c")
	bin := filepath.Join(n.Dir, "pause")
	if err := os.WriteFile(src, []byte(pauseC), 0o644); err != nil {
		return err
	}
	if out, err := exec.Command("gcc", "-static", "-Os", "-o", bin, src).CombinedOutput(); err != nil {
		return fmt.Errorf("build pause: %v: %s", err, out)
	}
	archive := filepath.Join(n.Dir, "pause.tar")
	if err := WriteOCIArchive(archive, PauseImage, []string{"/pause"}, ImageFile{Path: "pause", Source: bin, Mode: 0o755}); err != nil {
		return err
	}
	return n.ImportImage(archive)
}
