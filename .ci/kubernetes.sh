#!/usr/bin/env bash
# Builds the Kubernetes binaries the kubernetes worker provider's tests run
# against, from the Go module proxy, into the test cache:
#
#   .ci/kubernetes.sh control-plane   kube-apiserver (+ etcd from Debian's etcd-server)
#   .ci/kubernetes.sh node            kube-scheduler, kube-controller-manager, kubelet,
#                                     kubectl, containerd 2.x, its runc shim and ctr,
#                                     the CNI loopback plugin and a static pause
#                                     binary (the Pod sandbox's, imported without a
#                                     registry); runc itself is Debian's
#
# The kubernetes module's zip leaves out staging/, which its go.mod replaces
# every k8s.io/* module with; each staging module is served by the proxy as
# k8s.io/<name>@v0.<minor>.<patch>, so they are copied into place and the
# build runs with GOWORK=off. Cold builds on a 2-core machine: kube-apiserver
# about 9 minutes, the node tier about 10 more; a rebuild is skipped when the
# binary exists. Tests find the binaries through HOPPER_TEST_KUBERNETES (the
# directory) or in the default cache directory, and skip when they are missing.
set -euo pipefail

version=1.37.2
staging_version=0.37.2
containerd_version=v2.4.2
cni_version=v1.9.1
cache="${XDG_CACHE_HOME:-$HOME/.cache}/hopper-test"
bin="$cache/kubernetes-v$version"
src="$cache/kubernetes-src-v$version"
export GOFLAGS="-mod=mod -buildvcs=false" GOWORK=off CGO_ENABLED=0

say() { printf '== %s\n' "$*" >&2; }

# source puts a writable copy of k8s.io/kubernetes with its staging modules in $src.
source_tree() {
	[ -f "$src/.complete" ] && return 0
	local dir name mod
	dir="$(go mod download -json "k8s.io/kubernetes@v$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	rm -rf "$src"
	mkdir -p "$src"
	cp -r "$dir/." "$src/"
	chmod -R u+w "$src"
	for name in $(sed -n 's#^[[:space:]]*\./staging/src/k8s.io/\(.*\)$#\1#p' "$src/go.work"); do
		case "$name" in sample-cli-plugin | sample-controller) continue ;; esac
		mod="$(go mod download -json "k8s.io/$name@v$staging_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
		mkdir -p "$src/staging/src/k8s.io/$name"
		cp -r "$mod/." "$src/staging/src/k8s.io/$name/"
	done
	chmod -R u+w "$src"
	touch "$src/.complete"
}

build() {
	local name=$1
	[ -x "$bin/$name" ] && return 0
	source_tree
	say "building $name v$version"
	local pkg="k8s.io/component-base/version"
	(cd "$src" && go build -trimpath -o "$bin/$name.tmp" \
		-ldflags "-s -w -X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=${version#1.}" \
		"./cmd/$name")
	mv "$bin/$name.tmp" "$bin/$name"
}

etcd() {
	[ -x "$bin/etcd" ] && return 0
	if [ ! -x /usr/bin/etcd ]; then
		say "installing etcd-server"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
		systemctl disable --now etcd >/dev/null 2>&1 || true
	fi
	ln -sf /usr/bin/etcd "$bin/etcd"
}

containerd() {
	[ -x "$bin/containerd" ] && [ -x "$bin/containerd-shim-runc-v2" ] && return 0
	say "building containerd $containerd_version"
	local tmp
	tmp="$(mktemp -d)"
	GOBIN="$tmp" go install -tags no_btrfs,no_devmapper,no_zfs \
		"github.com/containerd/containerd/v2/cmd/containerd@$containerd_version" \
		"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$containerd_version" \
		"github.com/containerd/containerd/v2/cmd/ctr@$containerd_version"
	mv "$tmp"/* "$bin/"
	rmdir "$tmp"
}

# cni is the loopback plugin: worker Pods use the host's network
# (hostNetwork), and the kubelet wants a network plugin configured before it
# calls the node Ready.
cni() {
	[ -x "$bin/cni/loopback" ] && return 0
	say "building the CNI loopback plugin $cni_version"
	mkdir -p "$bin/cni"
	GOBIN="$bin/cni" go install "github.com/containernetworking/plugins/plugins/main/loopback@$cni_version"
}

# pause is the Pod sandbox's process, from the kubernetes module's source,
# static so that its image is the one file.
pause() {
	[ -x "$bin/pause" ] && return 0
	source_tree
	if ! command -v gcc >/dev/null; then
		say "installing gcc"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >/dev/null
	fi
	say "building pause"
	gcc -static -Os -o "$bin/pause.tmp" "$src/build/pause/linux/pause.c"
	mv "$bin/pause.tmp" "$bin/pause"
}

mkdir -p "$bin"
case "${1:-control-plane}" in
control-plane)
	etcd
	build kube-apiserver
	;;
node)
	etcd
	build kube-apiserver
	build kube-scheduler
	build kube-controller-manager
	build kubelet
	build kubectl
	containerd
	cni
	pause
	;;
*)
	echo "usage: $0 control-plane|node" >&2
	exit 2
	;;
esac
echo "$bin"
