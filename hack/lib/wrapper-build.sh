# Sourced by hack/envtest.sh, hack/druid.sh, hack/etcdbrctl.sh and hack/etcd-release.sh: what
# building a tool from the Go module proxy through a wrapper module into the
# cache outside the repository has in common. The caller sets -euo
# pipefail, defines log and fail, sets mod_dir to the wrapper module, and
# sources lib/cache.sh first.

# cache_bin_dir SUBDIR NAME: the directory the binaries of this wrapper go
# to, ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/SUBDIR/NAME-<hash of the
# wrapper's go.sum>, keyed so that a bump of the wrapper builds afresh. Sets
# bin_root (the SUBDIR, created, without symlinks) and bin_dir.
cache_bin_dir() {
	command -v sha256sum >/dev/null || fail "sha256sum not found (coreutils)"
	local sum_hash
	sum_hash=$(sha256sum "$mod_dir/go.sum" | cut -c1-12)
	cache_subdir "$1"
	bin_dir="$bin_root/$2-$sum_hash"
}

# begin_build: Go must be there; the binaries are built into $tmp, a
# temporary directory on the cache's filesystem removed on exit, and moved
# into place when finished, so that an interrupted build never leaves a
# half-written file that the executable check would accept.
begin_build() {
	command -v go >/dev/null || fail "go not found in PATH; install Go from https://go.dev/dl/ (any recent version: $GOTOOLCHAIN, which go.mod names, is then fetched through the Go module proxy)"
	build_dir
	# GOWORK=off and -mod=readonly: the wrapper must be its own main module
	# with exactly the versions in its go.sum, whatever the caller's
	# environment says.
	export GOWORK=off CGO_ENABLED=0
}

# wrapper_build OUTPUT PACKAGE LDFLAGS: one binary of the wrapper module.
wrapper_build() {
	log "building $(basename "$1") from $2 (the first build takes a few minutes)"
	local start=$SECONDS
	(cd "$mod_dir" && go build -mod=readonly -trimpath -ldflags "$3" -o "$1" "$2") >&2 ||
		fail "building $2 failed (see above); the wrapper module is $mod_dir"
	log "built $(basename "$1") in $((SECONDS - start)) s"
}

# kubernetes_version: the k8s.io/kubernetes version the wrapper module at
# $mod_dir requires, read from its go.mod so that the -X version flags cannot
# drift from what is built. Sets k8s_version (v1.37.1) and k8s_ldflags: the
# flags that make a Kubernetes binary report that version (without them it
# says v0.0.0-master+$Format:%H$, and kubeadm's preflight would reject the
# kubelet's version).
kubernetes_version() {
	k8s_version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v[0-9]+\.[0-9]+\.[0-9]+$/ { print $2; exit }
		$1 == "require" && $2 == "k8s.io/kubernetes" { print $3; exit }' "$mod_dir/go.mod")
	[[ "$k8s_version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] ||
		fail "cannot read the k8s.io/kubernetes version from $mod_dir/go.mod (got '${k8s_version}')"
	k8s_ldflags="-s -w \
-X k8s.io/component-base/version.gitVersion=$k8s_version \
-X k8s.io/component-base/version.gitMajor=${BASH_REMATCH[1]} \
-X k8s.io/component-base/version.gitMinor=${BASH_REMATCH[2]} \
-X k8s.io/client-go/pkg/version.gitVersion=$k8s_version"
}
