package kubetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNodeRunsPod starts a real node (containerd, runc, kubelet) and runs
// a pod of an image built here: a static program that writes a line to
// a hostPath file and exits 0; the file on the host has the line.
func TestNodeRunsPod(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a kubelet runs as root")
	}
	c := Start(t)
	n := StartNode(t, c, NodeOptions{Labels: map[string]string{"probectl.dev/lab": "yes"}})
	dir := t.TempDir()
	src := filepath.Join(dir, "hello.c")
	os.WriteFile(src, []byte("#include <stdio.h>\nint main(void){FILE*f=fopen(\"/out/hello\",\"w\");if(!f)return 3;fputs(\"hello from a pod\\n\",f);return fclose(f)!=0;}\n"), 0o644)
	bin := filepath.Join(dir, "hello")
	if out, err := exec.Command("gcc", "-static", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	archive := filepath.Join(dir, "hello.tar")
	if err := WriteOCIArchive(archive, "probectl.test/hello:1", []string{"/hello"}, ImageFile{Path: "hello", Source: bin, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	if err := n.ImportImage(archive); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	os.Mkdir(out, 0o755)
	hostDir := corev1.HostPathDirectory
	pod, err := n.RunPod(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "hello", Image: "probectl.test/hello:1", ImagePullPolicy: corev1.PullNever,
				VolumeMounts: []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}}},
			Volumes: []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out, Type: &hostDir}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod: %s", PodSummary(pod))
	}
	got, err := os.ReadFile(filepath.Join(out, "hello"))
	if err != nil || string(got) != "hello from a pod\n" {
		t.Fatalf("the pod wrote %q (%v), want %q", got, err, "hello from a pod\n")
	}
}
