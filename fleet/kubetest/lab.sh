#!/usr/bin/env bash
# The Kubernetes lab: kube-apiserver, kubelet, kube-controller-manager,
# kube-scheduler, kubectl and etcd built from the Go module proxy into a
# cache outside the git tree, keyed by version. Idempotent: a warm cache
# returns at once; a cache missing some binaries builds only those (the
# Kubernetes ones in one `go build`, so they share its compilation). Prints
# the directory holding them (what KUBEBUILDER_ASSETS / PROBECTL_KUBE_ASSETS
# point at).
#
# kube-apiserver cannot be built with `go install ...@version` (k8s.io/kubernetes
# has replace directives), so a throwaway module requires it and repeats the
# replaces for the staging modules it requires at v0.0.0.
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/probectl/kube"
dir="$cache/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"

kube_bins=(kube-apiserver kubelet kube-controller-manager kube-scheduler kubectl)
missing() {
	local b
	for b in "${kube_bins[@]}" etcd; do
		[ -x "$dir/$b" ] || echo "$b"
	done
}
if [ -z "$(missing)" ]; then
	echo "$dir"
	exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9 # two checkouts building at once wait for each other
need="$(missing)"
if [ -z "$need" ]; then
	echo "$dir"
	exit 0
fi

work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/out" "$work/kube" "$work/etcd"
start=$(date +%s)

# The Kubernetes binaries still missing, in one build.
pkgs=()
for b in $need; do
	case "$b" in
	kubectl) pkgs+=(k8s.io/kubernetes/cmd/kubectl) ;;
	kube-*) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
	kubelet) pkgs+=(k8s.io/kubernetes/cmd/kubelet) ;;
	esac
done
if [ ${#pkgs[@]} -gt 0 ]; then
	minor="${KUBE_VERSION#v1.}"
	staging="v0.$minor"
	gomod="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
	gover="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod")"
	godebug="$(sed -n 's/^godebug \(.*\)$/\1/p' "$gomod")"
	{
		echo "module probectl.dev/kubelab/kube"
		echo "go $gover"
		[ -n "$godebug" ] && echo "godebug $godebug"
		echo "require k8s.io/kubernetes $KUBE_VERSION"
		# every k8s.io module kubernetes requires at v0.0.0 is a staging module
		grep -oE '^[[:space:]]+k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$gomod" | awk -v v="$staging" '{print "replace " $1 " => " $1 " " v}'
	} >"$work/kube/go.mod"
	(cd "$work/kube" && CGO_ENABLED=0 go build -mod=mod -trimpath \
		-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION" \
		-o "$work/out/" "${pkgs[@]}") >&2
fi

# etcd: the main package is the root of go.etcd.io/etcd/server/v3.
if grep -qx etcd <<<"$need"; then
	printf 'module probectl.dev/kubelab/etcd\ngo 1.26\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$work/etcd/go.mod"
	(cd "$work/etcd" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" \
		-o "$work/out/etcd" go.etcd.io/etcd/server/v3) >&2
fi

mkdir -p "$dir"
for b in $need; do
	mv "$work/out/$b" "$dir/$b"
done
echo "kube lab: built" $need "($KUBE_VERSION, etcd $ETCD_VERSION) in $(( $(date +%s) - start ))s" >&2
echo "$dir"
