#!/usr/bin/env bash
# The Kubernetes lab: kube-apiserver, kube-controller-manager and etcd built
# from the Go module proxy into a cache outside the git tree, keyed by
# version. Idempotent: a warm cache returns at once; a binary missing from
# it (a cache from before it was added) is built alone, next to the others.
# Prints the directory holding the binaries (what KUBEBUILDER_ASSETS /
# PROBECTL_KUBE_ASSETS point at).
#
# The kube binaries cannot be built with `go install ...@version`
# (k8s.io/kubernetes has replace directives), so a throwaway module requires
# it and repeats the replaces for the staging modules it requires at v0.0.0.
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/probectl/kube"
dir="$cache/kube-$KUBE_VERSION-etcd-$ETCD_VERSION"
# The binaries, each built from module k8s.io/kubernetes unless it is etcd.
bins=(etcd kube-apiserver kube-controller-manager)

missing() {
	local b
	for b in "${bins[@]}"; do
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
todo="$(missing)"
if [ -z "$todo" ]; then
	echo "$dir"
	exit 0
fi

work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/out" "$work/kube" "$work/etcd" "$dir"
start=$(date +%s)

# kubemod writes the throwaway module that builds k8s.io/kubernetes' commands.
kubemod() {
	local minor="${KUBE_VERSION#v1.}" gomod gover godebug
	gomod="$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')"
	gover="$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod")"
	godebug="$(sed -n 's/^godebug \(.*\)$/\1/p' "$gomod")"
	{
		echo "module probectl.dev/kubelab/apiserver"
		echo "go $gover"
		[ -n "$godebug" ] && echo "godebug $godebug"
		echo "require k8s.io/kubernetes $KUBE_VERSION"
		# every k8s.io module kubernetes requires at v0.0.0 is a staging module
		grep -oE '^[[:space:]]+k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$gomod" | awk -v v="v0.$minor" '{print "replace " $1 " => " $1 " " v}'
	} >"$work/kube/go.mod"
}

for b in $todo; do
	if [ "$b" = etcd ]; then
		# the main package is the root of go.etcd.io/etcd/server/v3
		printf 'module probectl.dev/kubelab/etcd\ngo 1.26\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" >"$work/etcd/go.mod"
		(cd "$work/etcd" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" \
			-o "$work/out/etcd" go.etcd.io/etcd/server/v3) >&2
	else
		[ -f "$work/kube/go.mod" ] || kubemod
		(cd "$work/kube" && CGO_ENABLED=0 go build -mod=mod -trimpath \
			-ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION" \
			-o "$work/out/$b" "k8s.io/kubernetes/cmd/$b") >&2
	fi
	mv "$work/out/$b" "$dir/$b" # one rename each: a binary in the cache is whole
done

echo "kube lab: built" $todo "(kube $KUBE_VERSION, etcd $ETCD_VERSION) in $(( $(date +%s) - start ))s" >&2
echo "$dir"
