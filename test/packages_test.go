package test

// The .deb and .rpm packages (hack/packages.sh, docs/packaging.md): what
// dpkg-deb and rpm read in them, that two builds are byte-identical, the
// version scheme. The install, upgrade and removal on a pristine Debian
// host under systemd is install_test.go.

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

// The versions the tests build: the older one is shared by the tests (built
// once), the newer one is the upgrade.
const (
	pkgVersion      = "0.0.0~test.1"
	pkgVersionNewer = "0.0.0~test.2"
	pkgRelease      = "1"
)

// pkgArches are the packaged Go architectures with their names in the
// .deb, in the .rpm and in ELF.
var pkgArches = map[string]struct {
	deb, rpm string
	machine  elf.Machine
}{
	"amd64": {"amd64", "x86_64", elf.EM_X86_64},
	"arm64": {"arm64", "aarch64", elf.EM_AARCH64},
}

// packagedFile is one path the packages install, with its mode as ls
// prints it.
type packagedFile struct {
	path, perms string
}

// packagedFiles is everything the packages own, except the man pages
// (manPages lists them).
var packagedFiles = []packagedFile{
	{"/usr/bin/etcdlet", "-rwxr-xr-x"},
	{"/usr/lib/systemd/system/etcdlet.service", "-rw-r--r--"},
	{"/usr/lib/systemd/system/etcdlet@.service", "-rw-r--r--"},
	{"/usr/lib/systemd/system/etcdlet.target", "-rw-r--r--"},
	{"/usr/lib/systemd/system/kubelet.service.d/10-etcdlet.conf", "-rw-r--r--"},
	{"/usr/share/etcdlet/kubelet-standalone/20-etcdlet-standalone.conf", "-rw-r--r--"},
	{"/usr/share/etcdlet/kubelet-standalone/kubelet-standalone.yaml", "-rw-r--r--"},
	{"/etc/etcdlet", "drwxr-xr-x"},
	{"/etc/etcdlet/config.yaml", "-rw-------"},
	{"/var/lib/etcdlet", "drwx------"},
	{"/var/lib/etcd", "drwx------"},
	{"/usr/share/bash-completion/completions/etcdlet", "-rw-r--r--"},
	{"/usr/share/zsh/vendor-completions/_etcdlet", "-rw-r--r--"},
	{"/usr/share/fish/vendor_completions.d/etcdlet.fish", "-rw-r--r--"},
}

const packagedConfig = "/etc/etcdlet/config.yaml"

// The default configuration's refusal by etcdlet validate, line by line:
// it names what the operator must fill in.
var defaultConfigRefusal = []string{
	"cluster.name: required: the member name prefix, e.g. etcd-main",
	"members.addresses: required with members.source static: list at least one member IP",
}

// packageSet is one run of hack/packages.sh.
type packageSet struct {
	version, dir string
	took         time.Duration
}

func (p packageSet) deb(arch string) string {
	return filepath.Join(p.dir, fmt.Sprintf("etcdlet_%s-%s_%s.deb", p.version, pkgRelease, pkgArches[arch].deb))
}

func (p packageSet) rpm(arch string) string {
	return filepath.Join(p.dir, fmt.Sprintf("etcdlet-%s-%s.%s.rpm", p.version, pkgRelease, pkgArches[arch].rpm))
}

// buildPackages runs hack/packages.sh for version into dir; env adds to
// (and overrides) its environment.
func buildPackages(version, dir string, env ...string) (packageSet, error) {
	cmd := exec.Command(filepath.Join(harness.RepoRoot(), "hack", "packages.sh"))
	cmd.Dir = harness.RepoRoot()
	cmd.Env = append(os.Environ(), "VERSION="+version, "RELEASE="+pkgRelease, "DIST="+dir,
		"ARCHES=amd64 arm64", "PACKAGE_CONFIG=packaging/config.yaml")
	cmd.Env = append(cmd.Env, env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return packageSet{}, fmt.Errorf("hack/packages.sh (VERSION=%s %s) failed: %v\n%s", version, strings.Join(env, " "), err, out)
	}
	return packageSet{version, dir, time.Since(start).Round(100 * time.Millisecond)}, nil
}

var shared struct {
	once sync.Once
	set  packageSet
	err  error
}

// sharedPackages builds the older version's packages once for all tests,
// into the directory TestMain removes when the tests are done.
func sharedPackages(t *testing.T) packageSet {
	t.Helper()
	requireTools(t, map[string]string{"gzip": "gzip"})
	shared.once.Do(func() {
		shared.set, shared.err = buildPackages(pkgVersion, filepath.Join(filepath.Dir(binary), "packages"))
		if shared.err == nil {
			t.Logf("built the %s packages in %s", pkgVersion, shared.set.took)
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.set
}

// shippedDocs is the documentation the packages install under
// /usr/share/doc/etcdlet: the README, every page of docs/ but
// development.md (for contributors), and the example configurations.
func shippedDocs(t *testing.T) []string {
	t.Helper()
	root := harness.RepoRoot()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob(filepath.Join(root, "config", "examples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{docDir + "/README.md"}
	for _, p := range pages {
		if filepath.Base(p) != "development.md" {
			docs = append(docs, docDir+"/"+filepath.Base(p))
		}
	}
	for _, e := range examples {
		docs = append(docs, docDir+"/examples/"+filepath.Base(e))
	}
	deploy, err := filepath.Glob(filepath.Join(root, "deploy", "rbac", "*.yaml"))
	if err != nil || len(deploy) < 2 {
		t.Fatalf("found %v in deploy/rbac (%v): the repository is not whole", deploy, err)
	}
	for _, d := range deploy {
		docs = append(docs, docDir+"/deploy/rbac/"+filepath.Base(d))
	}
	docs = append(docs, docDir+"/deploy/prometheus/etcdlet-alerts.yaml")
	if len(pages) < 10 || len(examples) < 3 {
		t.Fatalf("found %d pages in docs/ and %d examples: the repository is not whole", len(pages), len(examples))
	}
	return docs
}

// docDir is where the packages install the documentation.
const docDir = "/usr/share/doc/etcdlet"

// docPointer is a path into docDir in a help text.
var docPointer = regexp.MustCompile(`/usr/share/doc/etcdlet/[A-Za-z0-9._/-]*[A-Za-z0-9]`)

// manPages is the man page of every command the binary offers (a hidden
// command has none), as hack/packages.sh installs them, and every path
// into docDir that they (and so --help) point to.
func manPages(t *testing.T) (pages, pointers []string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(binary, "gen-docs", "--man", dir)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("etcdlet gen-docs: %v\n%s", err, out)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pages = append(pages, "/usr/share/man/man1/"+e.Name()+".gz")
		text, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		// roff escapes a hyphen as \-.
		for _, ptr := range docPointer.FindAllString(strings.ReplaceAll(string(text), `\-`, "-"), -1) {
			if !slices.Contains(pointers, ptr) && ptr != docDir {
				pointers = append(pointers, ptr)
			}
		}
	}
	if len(pointers) < 5 {
		t.Errorf("the man pages point to %d documentation pages (%v); the help lost its pointers", len(pointers), pointers)
	}
	for _, want := range []string{"etcdlet.1", "etcdlet-run.1", "etcdlet-validate.1", "etcdlet-completion.1"} {
		if !slices.Contains(pages, "/usr/share/man/man1/"+want+".gz") {
			t.Errorf("no man page %s among %v", want, pages)
		}
	}
	for _, p := range pages {
		if strings.Contains(p, "gen-docs") {
			t.Errorf("the hidden gen-docs command has a man page: %s", p)
		}
	}
	return pages, pointers
}

func output(t *testing.T, argv ...string) string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", strings.Join(argv, " "), err, out, stderr.Bytes())
	}
	return string(out)
}

func readRepoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.RepoRoot(), path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The packages of both architectures hold what docs/packaging.md says,
// with its modes, owners, conffile and scripts, as dpkg-deb and rpm read
// them, and the binary in them is a static, trimmed build for its
// architecture that reports the package version.
func TestPackageContents(t *testing.T) {
	t.Parallel()
	requireTools(t, map[string]string{"rpm": "rpm", "dpkg-deb": "dpkg"})
	p := sharedPackages(t)
	pages, pointers := manPages(t)
	want := map[string]string{}
	for _, f := range packagedFiles {
		want[f.path] = f.perms
	}
	for _, page := range pages {
		want[page] = "-rw-r--r--"
	}
	docs := shippedDocs(t)
	for _, doc := range docs {
		want[doc] = "-rw-r--r--"
	}
	// Every documentation page --help and the man pages point to is in
	// the package: a host has no checkout to read docs/ from.
	for _, ptr := range pointers {
		if !slices.Contains(docs, ptr) {
			t.Errorf("the help points to %s, which the packages do not install", ptr)
		}
	}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			debBinary := checkDeb(t, p, arch, want)
			checkRPM(t, p, arch, want, debBinary)
		})
	}
	checkDocLinks(t, debFiles(t, p.deb("amd64"), docs...))
}

// mdLink is a Markdown link's target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// checkDocLinks: every link between the installed pages leads to an
// installed file or directory, as a reader on the host follows it.
func checkDocLinks(t *testing.T, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if !strings.HasSuffix(name, ".md") {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(content, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			resolved := path.Join(path.Dir(name), target)
			if !slices.ContainsFunc(slices.Collect(maps.Keys(files)), func(f string) bool { return f == resolved || strings.HasPrefix(f, resolved+"/") }) {
				t.Errorf("%s links to %s, which the packages do not install (%s)", name, m[1], resolved)
			}
		}
	}
}

// checkDeb checks the .deb of arch and returns the SHA-256 of its binary.
func checkDeb(t *testing.T, p packageSet, arch string, want map[string]string) string {
	t.Helper()
	deb := p.deb(arch)
	fields := output(t, "dpkg-deb", "-f", deb, "Package", "Version", "Architecture")
	if w := fmt.Sprintf("Package: etcdlet\nVersion: %s-%s\nArchitecture: %s\n", p.version, pkgRelease, pkgArches[arch].deb); fields != w {
		t.Errorf("dpkg-deb -f: got\n%s\nwant\n%s", fields, w)
	}
	if got := output(t, "dpkg-deb", "-I", deb, "conffiles"); got != packagedConfig+"\n" {
		t.Errorf("conffiles: got %q, want only %s", got, packagedConfig)
	}
	for script, src := range map[string]string{"postinst": "postinstall.sh", "prerm": "preremove.sh", "postrm": "postremove.sh"} {
		if got := output(t, "dpkg-deb", "-I", deb, script); got != readRepoFile(t, "packaging/"+src) {
			t.Errorf("the .deb's %s is not packaging/%s:\n%s", script, src, got)
		}
	}
	if info := output(t, "dpkg-deb", "-I", deb); strings.Contains(info, " preinst ") {
		t.Errorf("the .deb has a preinst:\n%s", info)
	}

	// dpkg-deb -c: "<perms> <owner>/<group> <size> <date> <time> ./<path>".
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(output(t, "dpkg-deb", "-c", deb)), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 {
			t.Errorf("dpkg-deb -c: unexpected line %q", line)
			continue
		}
		path := strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")
		listed[path] = true
		if f[1] != "root/root" {
			t.Errorf("%s is owned by %s, want root/root", path, f[1])
		}
		perms, ok := want[path]
		switch {
		case ok && f[0] != perms:
			t.Errorf(".deb: %s has mode %s, want %s", path, f[0], perms)
		case !ok && f[0] != "drwxr-xr-x":
			t.Errorf(".deb: unexpected %s %s", f[0], path)
		}
	}
	for path := range want {
		if !listed[path] {
			t.Errorf(".deb lacks %s", path)
		}
	}

	files := debFiles(t, deb, "/usr/bin/etcdlet", packagedConfig)
	if files[packagedConfig] != readRepoFile(t, "packaging/config.yaml") {
		t.Errorf("the .deb's %s is not packaging/config.yaml", packagedConfig)
	}
	bin := []byte(files["/usr/bin/etcdlet"])
	checkBinary(t, bin, arch, p.version)
	sum := sha256.Sum256(bin)
	return hex.EncodeToString(sum[:])
}

// debFiles reads the named files out of a .deb's data.
func debFiles(t *testing.T, deb string, paths ...string) map[string]string {
	t.Helper()
	data := output(t, "dpkg-deb", "--fsys-tarfile", deb)
	files := map[string]string{}
	tr := tar.NewReader(strings.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", deb, err)
		}
		if name := strings.TrimPrefix(h.Name, "."); slices.Contains(paths, name) {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[name] = string(b)
		}
	}
	for _, p := range paths {
		if _, ok := files[p]; !ok {
			t.Fatalf("%s has no %s", deb, p)
		}
	}
	return files
}

// checkBinary: an ELF for arch without an interpreter (static), built by
// hack/packages.sh's flags, with the package version.
func checkBinary(t *testing.T, bin []byte, arch, version string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("/usr/bin/etcdlet is not an ELF file: %v", err)
	}
	if f.Machine != pkgArches[arch].machine {
		t.Errorf("/usr/bin/etcdlet is for %s, want %s", f.Machine, pkgArches[arch].machine)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("/usr/bin/etcdlet has an ELF interpreter: not statically linked")
		}
	}
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("/usr/bin/etcdlet: no Go build info: %v", err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for key, want := range map[string]string{"GOOS": "linux", "GOARCH": arch, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[key] != want {
			t.Errorf("/usr/bin/etcdlet was built with %s=%q, want %q", key, settings[key], want)
		}
	}
	// With -trimpath, go leaves -ldflags out of the build info; the version
	// set with -X main.version is in the binary's data.
	if !bytes.Contains(bin, []byte(version)) {
		t.Errorf("/usr/bin/etcdlet does not contain its version %s (-X main.version)", version)
	}
}

// checkRPM checks the .rpm of arch; its binary must be the .deb's.
func checkRPM(t *testing.T, p packageSet, arch string, want map[string]string, debBinary string) {
	t.Helper()
	rpm := p.rpm(arch)
	header := output(t, "rpm", "-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{OS} %{BUILDHOST}\n", rpm)
	if w := fmt.Sprintf("etcdlet %s %s %s linux reproducible\n", p.version, pkgRelease, pkgArches[arch].rpm); header != w {
		t.Errorf("rpm header: got %q, want %q", header, w)
	}
	if got := output(t, "rpm", "-K", rpm); !strings.HasSuffix(got, ": digests OK\n") {
		t.Errorf("rpm -K: %s", got)
	}
	if got := output(t, "rpm", "-qpc", rpm); got != packagedConfig+"\n" {
		t.Errorf("rpm -qpc: got %q, want only %s", got, packagedConfig)
	}

	// Every file with its mode, flags (c: config, n: noreplace) and owner;
	// exactly the expected set.
	got := map[string]bool{}
	list := output(t, "rpm", "-qp", "--qf", "[%{FILEMODES:perms}|%{FILEFLAGS:fflags}|%{FILEUSERNAME}:%{FILEGROUPNAME}|%{FILEDIGESTS}|%{FILENAMES}\n]", rpm)
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 5 {
			t.Errorf("rpm file list: unexpected line %q", line)
			continue
		}
		perms, flags, owner, digest, path := f[0], f[1], f[2], f[3], f[4]
		got[path] = true
		if w, ok := want[path]; !ok {
			t.Errorf(".rpm: unexpected %s %s", perms, path)
		} else if perms != w {
			t.Errorf(".rpm: %s has mode %s, want %s", path, perms, w)
		}
		if owner != "root:root" {
			t.Errorf(".rpm: %s is owned by %s, want root:root", path, owner)
		}
		wantFlags := ""
		if path == packagedConfig {
			wantFlags = "cn"
		}
		if flags != wantFlags {
			t.Errorf(".rpm: %s has file flags %q, want %q", path, flags, wantFlags)
		}
		if path == "/usr/bin/etcdlet" && digest != debBinary {
			t.Errorf(".rpm: /usr/bin/etcdlet (sha256 %s) is not the .deb's (sha256 %s)", digest, debBinary)
		}
	}
	for path := range want {
		if !got[path] {
			t.Errorf(".rpm lacks %s", path)
		}
	}

	scripts := output(t, "rpm", "-qp", "--scripts", rpm)
	for _, s := range []struct{ tag, header, src string }{
		{"POSTIN", "postinstall scriptlet (using /bin/sh)", "postinstall.sh"},
		{"PREUN", "preuninstall scriptlet (using /bin/sh)", "preremove.sh"},
		{"POSTUN", "postuninstall scriptlet (using /bin/sh)", "postremove.sh"},
	} {
		if !strings.Contains(scripts, s.header) {
			t.Errorf("rpm --scripts has no %q:\n%s", s.header, scripts)
		}
		if got := output(t, "rpm", "-qp", "--qf", "%{"+s.tag+"}", rpm); strings.TrimSpace(got) != strings.TrimSpace(readRepoFile(t, "packaging/"+s.src)) {
			t.Errorf("the .rpm's %s scriptlet is not packaging/%s:\n%s", s.tag, s.src, got)
		}
	}
	if strings.Contains(scripts, "preinstall scriptlet") {
		t.Errorf("the .rpm has a %%pre scriptlet:\n%s", scripts)
	}
}

// Two builds of the same commit and version, into two directories, are
// byte-identical (SOURCE_DATE_EPOCH, -trimpath, fixed modes and build host).
func TestPackageReproducible(t *testing.T) {
	t.Parallel()
	first := sharedPackages(t)
	second, err := buildPackages(pkgVersion, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built the %s packages again in %s", pkgVersion, second.took)
	names := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, e := range entries {
			n = append(n, e.Name())
		}
		return n
	}
	a, b := names(first.dir), names(second.dir)
	if !slices.Equal(a, b) || len(a) != 4 {
		t.Fatalf("the builds wrote different files (want 4 each): %v and %v", a, b)
	}
	for _, name := range a {
		x, err := os.ReadFile(filepath.Join(first.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(second.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds (%d and %d bytes)", name, len(x), len(y))
		} else {
			t.Logf("%s: %d bytes, identical", name, len(x))
		}
	}
}

// The version scheme: git describe output to a version that dpkg and rpm
// both accept and order by history, releases after every snapshot.
func TestPackageVersionScheme(t *testing.T) {
	t.Parallel()
	requireTools(t, map[string]string{"rpm": "rpm", "dpkg": "dpkg"})
	script := filepath.Join(harness.RepoRoot(), "hack", "packages.sh")
	version := func(args ...string) (string, error) {
		cmd := exec.Command(script, append([]string{"version"}, args...)...)
		cmd.Env = append(os.Environ(), "VERSION=")
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	epoch := strconv.FormatInt(time.Date(2026, 11, 24, 13, 21, 41, 0, time.UTC).Unix(), 10)
	later := strconv.FormatInt(time.Date(2026, 11, 24, 13, 22, 0, 0, time.UTC).Unix(), 10)
	// In the order the versions must sort.
	cases := []struct{ describe, epoch, want string }{
		{"1ef5982", epoch, "0.0.0~git20261124.132141.g1ef5982"},
		{"1ef5982-dirty", epoch, "0.0.0~git20261124.132141.g1ef5982.dirty"},
		{"0badc0de", later, "0.0.0~git20261124.132200.g0badc0de"},
		{"v1.2.3", epoch, "1.2.3"},
		{"v1.2.3-4-gabc1234", epoch, "1.2.3+4.gabc1234"},
		{"v1.2.3-12-gabc1234-dirty", epoch, "1.2.3+12.gabc1234.dirty"},
		{"v1.3.0-rc.1", epoch, "1.3.0~rc.1"},
		{"v1.3.0-rc.1-2-gdef5678", epoch, "1.3.0~rc.1+2.gdef5678"},
		{"v1.3.0", epoch, "1.3.0"},
	}
	var versions []string
	for _, c := range cases {
		got, err := version(c.describe, c.epoch)
		if err != nil || got != c.want {
			t.Errorf("version of %q: got %q (%v), want %q", c.describe, got, err, c.want)
		}
		versions = append(versions, c.want)
	}
	for i := 1; i < len(versions); i++ {
		a, b := versions[i-1]+"-1", versions[i]+"-1"
		if err := exec.Command("dpkg", "--compare-versions", a, "lt", b).Run(); err != nil {
			t.Errorf("dpkg does not order %s before %s", a, b)
		}
		cmp := output(t, "rpm", "--eval", fmt.Sprintf("%%{lua: print(rpm.vercmp(%q, %q))}", versions[i-1], versions[i]))
		if strings.TrimSpace(cmp) != "-1" {
			t.Errorf("rpm does not order %s before %s (vercmp %s)", versions[i-1], versions[i], strings.TrimSpace(cmp))
		}
	}
	if out, err := version("release-2026", epoch); err == nil || !strings.Contains(out, "set VERSION") {
		t.Errorf("a tag that is no version: got %q, %v; want a refusal that says to set VERSION", out, err)
	}

	// This checkout's version is one dpkg accepts.
	mine, err := version()
	if err != nil {
		t.Fatalf("hack/packages.sh version: %v: %s", err, mine)
	}
	if out, err := exec.Command("dpkg", "--validate-version", mine+"-1").CombinedOutput(); err != nil {
		t.Errorf("dpkg refuses this checkout's version %q: %s", mine, out)
	}
	t.Logf("this checkout's package version: %s", mine)
}
