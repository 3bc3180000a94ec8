package pods

import (
	"strings"
	"testing"
)

const (
	uid  = "1f0e4c2a-8b3d-4e5f-9a6b-7c8d9e0f1a2b"
	uidU = "1f0e4c2a_8b3d_4e5f_9a6b_7c8d9e0f1a2b"
	cid  = "3b5e0c9a1d2f4e6b8a7c9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c"
)

func TestParsePath(t *testing.T) {
	for _, c := range []struct {
		path string
		want Ref
		ok   bool
	}{
		{"/kubepods/burstable/pod" + uid + "/" + cid, Ref{uid, cid, "burstable"}, true},
		{"/kubepods/besteffort/pod" + uid + "/" + cid, Ref{uid, cid, "besteffort"}, true},
		{"/kubepods/pod" + uid + "/" + cid, Ref{uid, cid, "guaranteed"}, true},
		{"/kubepods/pod" + uid, Ref{uid, "", "guaranteed"}, true},
		{"/kubepods/pod" + uid + "/" + cid + "/init.scope", Ref{uid, cid, "guaranteed"}, true},
		{"/custom/root/kubepods/burstable/pod" + uid + "/crio-" + cid, Ref{uid, cid, "burstable"}, true},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + cid + ".scope", Ref{uid, cid, "burstable"}, true},
		{"/kubepods.slice/kubepods-pod" + uidU + ".slice/docker-" + cid + ".scope", Ref{uid, cid, "guaranteed"}, true},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + uidU + ".slice/crio-" + cid + ".scope", Ref{uid, cid, "besteffort"}, true},
		{"/kubepods.slice/kubepods-pod" + uidU + ".slice/crio-conmon-" + cid + ".scope", Ref{uid, "", "guaranteed"}, true},
		{"/custom.slice/custom-kubepods.slice/custom-kubepods-burstable.slice/custom-kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + cid + ".scope", Ref{uid, cid, "burstable"}, true},
		{"/kubepods/burstable/pod0123456789abcdef0123456789ABCDEF/" + cid, Ref{"0123456789abcdef0123456789abcdef", cid, "burstable"}, true}, // a static pod's hash
		// Not pods, or hostile.
		{"/", Ref{}, false},
		{"/system.slice/ssh.service", Ref{}, false},
		{"/kubepods", Ref{}, false},
		{"/kubepods/burstable", Ref{}, false},
		{"/kubepods/burstable/pod", Ref{}, false},
		{"/kubepods/burstable/pod../" + cid, Ref{}, false},
		{"/kubepods/burstable/pod" + uid + "\n/" + cid, Ref{}, false},
		{"/kubepods/burstable/pod" + uid + "/" + cid + "x", Ref{}, false},
		{"/kubepods/burstable/pod" + uid + "/abc", Ref{}, false},
		{"/kubepods/burstable/pod" + strings.Repeat("a", 65) + "/" + cid, Ref{}, false},
		{"/kubepods.slice/kubepods-pod" + uidU + ".slice/cri-containerd-" + cid, Ref{}, false},
		{"/kubepods.slice/evil-pod" + uidU + ".slice/cri-containerd-" + cid + ".scope", Ref{}, false},
		{"/mykubepods/pod" + uid + "/" + cid, Ref{}, false},
	} {
		got, ok := ParsePath(c.path)
		if got != c.want || ok != c.ok {
			t.Errorf("ParsePath(%q) = %+v, %v; want %+v, %v", c.path, got, ok, c.want, c.ok)
		}
	}
}

// FuzzParsePath: any path parses or not without panicking, and what it
// gives is a UID and an ID of their alphabets, within their bounds.
func FuzzParsePath(f *testing.F) {
	f.Add("/kubepods/burstable/pod" + uid + "/" + cid)
	f.Add("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + uidU + ".slice/cri-containerd-" + cid + ".scope")
	f.Add("/a/kubepods.slice/-pod.slice/x.scope")
	f.Fuzz(func(t *testing.T, path string) {
		ref, ok := ParsePath(path)
		if !ok {
			if ref != (Ref{}) {
				t.Fatalf("ParsePath(%q) failed with %+v", path, ref)
			}
			return
		}
		if ref.PodUID == "" || len(ref.PodUID) > maxUIDLen || !allOf(ref.PodUID, "0123456789abcdef-") {
			t.Fatalf("ParsePath(%q): pod UID %q", path, ref.PodUID)
		}
		if ref.ContainerID != "" && (len(ref.ContainerID) < minCIDLen || len(ref.ContainerID) > maxCIDLen || !allOf(ref.ContainerID, "0123456789abcdef")) {
			t.Fatalf("ParsePath(%q): container ID %q", path, ref.ContainerID)
		}
		if !strings.Contains(path, "kubepods") {
			t.Fatalf("ParsePath(%q) found a pod outside kubepods", path)
		}
	})
}
