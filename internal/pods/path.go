package pods

import "strings"

// Ref is what a cgroup's path says of the task's pod: the pod's UID and,
// in a container's cgroup, the container's ID (empty in the pod's own
// cgroup).
type Ref struct {
	PodUID      string
	ContainerID string
	// QoS is the pod's class, as the path says it: guaranteed,
	// burstable or besteffort.
	QoS string
}

// Bounds of what a path's parts may be: a pod UID is a UUID, or a static
// pod's hash (32 hex digits); a container ID is 64 hex digits.
const (
	maxUIDLen = 64
	minCIDLen = 12
	maxCIDLen = 128
)

// ParsePath reads the pod and container of the cgroup at path (under the
// cgroup mount, "/" separated) in the kubelet's layouts:
//
//	cgroupfs: [/ROOT]/kubepods[/burstable|/besteffort]/pod<UID>/<CID>
//	systemd:  [/ROOT.slice]/[ROOT-]kubepods.slice/[ROOT-]kubepods-burstable.slice/
//	          [ROOT-]kubepods-burstable-pod<UID, _ for ->.slice/cri-containerd-<CID>.scope
//
// with docker-, crio- and containerd- scopes too, and cgroups below a
// container's its own. A path in no pod, or whose parts are not a UID and
// an ID, gives false.
func ParsePath(path string) (Ref, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range segs {
		if systemd, ok := kubepodsRoot(s); ok {
			return parseBelow(segs[i+1:], systemd)
		}
	}
	return Ref{}, false
}

// kubepodsRoot reports whether s is the kubepods cgroup, and of which
// driver.
func kubepodsRoot(s string) (systemd, ok bool) {
	if s == "kubepods" {
		return false, true
	}
	return true, s == "kubepods.slice" || strings.HasSuffix(s, "-kubepods.slice")
}

// parseBelow reads the QoS class, pod and container below kubepods.
func parseBelow(segs []string, systemd bool) (Ref, bool) {
	ref := Ref{QoS: "guaranteed"}
	if len(segs) > 0 {
		if q := qosOf(segs[0], systemd); q != "" {
			ref.QoS, segs = q, segs[1:]
		}
	}
	if len(segs) == 0 {
		return Ref{}, false
	}
	uid, ok := podUID(segs[0], systemd)
	if !ok {
		return Ref{}, false
	}
	ref.PodUID = uid
	if len(segs) > 1 {
		cid, ok := containerID(segs[1], systemd)
		if !ok {
			return Ref{}, false
		}
		ref.ContainerID = cid
	}
	return ref, true
}

// qosOf is the class a QoS cgroup names, or "".
func qosOf(s string, systemd bool) string {
	for _, q := range []string{"burstable", "besteffort"} {
		if !systemd && s == q || systemd && strings.HasSuffix(s, "kubepods-"+q+".slice") {
			return q
		}
	}
	return ""
}

// podUID reads pod<UID> (cgroupfs) or ...-pod<UID>.slice, dashes written
// as underscores (systemd).
func podUID(s string, systemd bool) (string, bool) {
	if systemd {
		i := strings.LastIndex(s, "-pod")
		if i < 0 || !strings.HasSuffix(s, ".slice") || !strings.HasPrefix(s, "kubepods") && !strings.Contains(s, "-kubepods") {
			return "", false
		}
		s = strings.ReplaceAll(strings.TrimSuffix(s[i+1:], ".slice"), "_", "-")
	}
	uid, ok := strings.CutPrefix(s, "pod")
	if !ok || len(uid) == 0 || len(uid) > maxUIDLen || !allOf(uid, "0123456789abcdefABCDEF-") {
		return "", false
	}
	return strings.ToLower(uid), true
}

// runtimePrefixes are how the container runtimes name a container's
// cgroup before its ID.
var runtimePrefixes = []string{"cri-containerd-", "containerd-", "docker-", "crio-", "cri-o-"}

// containerID reads <CID> (cgroupfs), or <runtime>-<CID>.scope (systemd;
// CRI-O's cgroupfs crio-<CID> too).
func containerID(s string, systemd bool) (string, bool) {
	if systemd {
		var ok bool
		if s, ok = strings.CutSuffix(s, ".scope"); !ok {
			return "", false
		}
	}
	if strings.HasPrefix(s, "crio-conmon-") {
		return "", true // CRI-O's monitor: of the pod, in no container
	}
	for _, p := range runtimePrefixes {
		if rest, ok := strings.CutPrefix(s, p); ok {
			s = rest
			break
		}
	}
	if len(s) < minCIDLen || len(s) > maxCIDLen || !allOf(s, "0123456789abcdef") {
		return "", false
	}
	return s, true
}

// allOf reports whether every byte of s is one of set.
func allOf(s, set string) bool {
	for i := range len(s) {
		if !strings.ContainsRune(set, rune(s[i])) {
			return false
		}
	}
	return true
}
