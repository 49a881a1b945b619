package test

// What every control-plane host of kubehost_test.go is made of: a Debian
// root with Debian's containerd and runc and etcdlet's .deb installed, the
// kubelet laid out as the Kubernetes packages do it, the shims this
// sandbox needs, and the images containerd imports instead of pulling.

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

// hostRoot is what every host is made of, built once for all tests into
// the directory TestMain removes when they are done.
type hostRoot struct {
	template string // tar of the root file system
	images   string // the image archives, bound into every host
	etcd     string // the etcd image the manifests name
}

var sharedRoot struct {
	once sync.Once
	root hostRoot
	ok   bool
}

// sharedHostRoot builds the images and the host root once (kubeNode: the
// kubelet and kubeadm, debs: containerd and runc).
func sharedHostRoot(t *testing.T, kubeNode, debs string) hostRoot {
	t.Helper()
	sharedRoot.once.Do(func() {
		start := time.Now()
		dir, err := os.MkdirTemp(filepath.Dir(binary), "kube-root-")
		if err != nil {
			t.Fatal(err)
		}
		kubeadm := filepath.Join(kubeNode, "kubeadm")
		r := hostRoot{images: filepath.Join(dir, "images"), template: filepath.Join(dir, "root.tar")}
		r.etcd = buildImages(t, r.images, kubeadm)
		buildTemplate(t, r.template, debs, pauseImage(t, kubeadm), r.etcd)
		t.Logf("built the hosts' root (containerd, the kubelet, etcdlet) and images in %s", time.Since(start).Round(100*time.Millisecond))
		sharedRoot.root, sharedRoot.ok = r, true
	})
	if !sharedRoot.ok {
		t.Fatal("building the hosts' root failed in another test (see there)")
	}
	return sharedRoot.root
}

// buildImages writes the image archives the hosts' containerd imports into
// dir and returns the etcd image's name: etcd (the binary hack/envtest.sh
// built, under kubeadm's name for its version), and the pause program
// under the sandbox image's name and every other name kubeadm's preflight
// wants present.
func buildImages(t *testing.T, dir, kubeadm string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	etcdBin := harness.EtcdBinary(t)
	version := output(t, etcdBin, "--version")
	v, ok := strings.CutPrefix(strings.SplitN(version, "\n", 2)[0], "etcd Version: ")
	if !ok {
		t.Fatalf("%s --version: %q", etcdBin, version)
	}
	etcd := "registry.k8s.io/etcd:" + v + "-0"
	if err := writeImage(filepath.Join(dir, "etcd.tar"), []string{etcd}, []string{"etcd"},
		map[string]string{"usr/local/bin/etcd": etcdBin}); err != nil {
		t.Fatal(err)
	}
	pause := filepath.Join(t.TempDir(), "pause")
	build := exec.Command("go", "build", "-trimpath", "-o", pause, "./testdata/pause")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/pause: %v\n%s", err, out)
	}
	names := strings.Fields(output(t, kubeadm, "config", "images", "list", "--kubernetes-version", kubeVersion))
	names = slices.DeleteFunc(names, func(n string) bool { return strings.HasPrefix(n, "registry.k8s.io/etcd:") })
	if err := writeImage(filepath.Join(dir, "pause.tar"), names, []string{"/pause"},
		map[string]string{"pause": pause}); err != nil {
		t.Fatal(err)
	}
	return etcd
}

// pauseImage is the sandbox image of kubeadm's list, containerd's
// sandbox_image.
func pauseImage(t *testing.T, kubeadm string) string {
	t.Helper()
	for _, n := range strings.Fields(output(t, kubeadm, "config", "images", "list", "--kubernetes-version", kubeVersion)) {
		if strings.HasPrefix(n, "registry.k8s.io/pause:") {
			return n
		}
	}
	t.Fatal("kubeadm config images list names no pause image")
	return ""
}

// buildTemplate installs runc, containerd and etcdlet's .deb into a fresh
// Debian root in a chroot (as an image build would), adds the kubelet as
// the Kubernetes packages lay it out, etcdlet's configuration and the
// test environment's shims, enables the units, and packs it into tarball.
func buildTemplate(t *testing.T, tarball, debs, pause, etcdImage string) {
	t.Helper()
	h := newNspawnHost(t, debianRoot(t))
	pkgs, _ := filepath.Glob(filepath.Join(debs, "*.deb"))
	pkgs = append(pkgs, sharedPackages(t).deb(runtime.GOARCH))
	args := []string{"dpkg", "-i"}
	for _, p := range pkgs {
		copyFile(t, p, h.file("/root/"+filepath.Base(p)))
		args = append(args, "/root/"+filepath.Base(p))
	}
	if out, err := h.chroot(args...); err != nil {
		t.Fatalf("in a chroot: %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, p := range pkgs {
		if err := os.Remove(h.file("/root/" + filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	for path, content := range hostFiles(pause) {
		mode := os.FileMode(0o644)
		if strings.HasPrefix(path, "/usr/local/sbin/") {
			mode = 0o755
		}
		h.write(path, content, mode)
	}
	for _, b := range []string{"kubelet", "kubeadm"} {
		if err := os.Symlink(filepath.Join(kubeNodeMount, b), h.file("/usr/bin/"+b)); err != nil {
			t.Fatal(err)
		}
	}
	// The kubelet's package creates its static pod dir.
	if err := os.MkdirAll(h.file("/etc/kubernetes/manifests"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The standalone kubelet, from the package's files as the operator
	// installs them, with what this sandbox needs on top: cgroupfs (systemd
	// here manages no v1 controllers) and cgroup v1 (the VM's).
	copyFile(t, h.file(standaloneDir+"/20-etcdlet-standalone.conf"), h.file(standaloneDropIn))
	kc := h.read(standaloneDir + "/kubelet-standalone.yaml")
	if !strings.Contains(kc, "\ncgroupDriver: systemd\n") {
		t.Fatalf("the packaged %s/kubelet-standalone.yaml no longer says cgroupDriver: systemd; adapt the test's override:\n%s", standaloneDir, kc)
	}
	kc = strings.Replace(kc, "\ncgroupDriver: systemd\n", "\ncgroupDriver: cgroupfs\n", 1) + "failCgroupV1: false\n"
	h.write(standaloneConfig, kc, 0o644)
	h.write(packagedConfig, etcdletConfig(etcdImage), 0o600)
	if out, err := h.chroot("systemctl", "enable", "containerd.service", "etcdlet.service", "kubelet.service"); err != nil {
		t.Fatalf("in a chroot: systemctl enable: %v\n%s", err, out)
	}
	run(t, "tar", "--numeric-owner", "-C", h.root, "-cf", tarball, ".")
	if err := os.RemoveAll(h.root); err != nil {
		t.Fatal(err)
	}
}

// hostFiles are the files of every host besides the packages: the kubelet
// as the Kubernetes packages install it (unit, kubeadm's drop-in), and what
// this sandbox needs (the test-env-* shims, containerd's configuration).
func hostFiles(pauseImage string) map[string]string {
	return map[string]string{
		"/usr/lib/systemd/system/kubelet.service": `[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`,
		"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": `# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# This is a file that "kubeadm init" and "kubeadm join" generates at runtime, populating the KUBELET_KUBEADM_ARGS variable dynamically
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
# This is a file that the user can use for overrides of the kubelet args as a last resort. Preferably, the user should use
# the .NodeRegistration.KubeletExtraArgs object in the configuration files instead. KUBELET_EXTRA_ARGS should be sourced from this file.
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`,
		// The recipe's containerd: cgroupfs, and no negative oom_score_adj
		// (the sandbox lacks CAP_SYS_RESOURCE).
		"/etc/containerd/config.toml": `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + pauseImage + `"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
`,
		// No registry: the images are imported before the kubelet starts.
		"/etc/systemd/system/containerd.service.d/10-test-env.conf": `[Unit]
Before=kubelet.service
[Service]
ExecStartPre=/usr/local/sbin/test-env-cgroups
ExecStartPost=/bin/sh -c 'for i in ` + imagesMount + `/*.tar; do ctr -n k8s.io images import "$i" >/dev/null || exit 1; done'
`,
		"/etc/systemd/system/kubelet.service.d/90-test-env.conf": `[Service]
ExecStartPre=/usr/local/sbin/test-env-kubelet
`,
		"/usr/local/sbin/test-env-cgroups": `#!/bin/sh
# nspawn mounts the cgroup v1 controllers read-only; runc creates the pods'
# cgroups in them.
set -e
for d in /sys/fs/cgroup/*/; do
	case $d in */systemd/ | */unified/) continue ;; esac
	mount -o remount,bind,rw "$d"
done
`,
		"/usr/local/sbin/test-env-kubelet": `#!/bin/sh
# What the kubelet needs and this sandbox lacks: /dev/kmsg, and the kernel
# tunables it wants (/proc/sys is the VM's and read-only here), shown to
# this host only by binding files with the wanted values over them.
set -e
[ -e /dev/kmsg ] || mknod -m 600 /dev/kmsg c 1 11
mkdir -p /run/test-env
for s in vm/overcommit_memory=1 kernel/panic=10 kernel/panic_on_oops=1; do
	f=/proc/sys/${s%=*} v=${s#*=}
	[ "$(cat "$f")" = "$v" ] && continue
	echo "$v" >"/run/test-env/${f##*/}"
	mount --bind "/run/test-env/${f##*/}" "$f"
done
`,
	}
}

// writeImage writes a docker-archive image (what `docker save` writes and
// `ctr images import` reads): manifest.json, the image config and one
// layer holding files (path in the image -> file here, mode 0755), under
// the given names.
func writeImage(path string, names, entrypoint []string, files map[string]string) error {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	dirs := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		for d := filepath.Dir(name); d != "."; d = filepath.Dir(d) {
			dirs[d+"/"] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := lw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755}); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		data, err := os.ReadFile(files[name])
		if err != nil {
			return err
		}
		if err := lw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(data))}); err != nil {
			return err
		}
		if _, err := lw.Write(data); err != nil {
			return err
		}
	}
	if err := lw.Close(); err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux",
		"config": map[string]any{"Entrypoint": entrypoint, "Env": []string{"PATH=/usr/local/bin:/usr/bin:/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{fmt.Sprintf("sha256:%x", sha256.Sum256(layer.Bytes()))}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": names, "Layers": []string{"layer.tar"}}})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {"config.json", config}, {"layer.tar", layer.Bytes()}} {
		if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data))}); err != nil {
			return err
		}
		if _, err := w.Write(e.data); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}
