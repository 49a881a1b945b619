package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config/trust/trusttest"
)

// transportRule is the rule a member address off this host breaks while
// etcd traffic is not secured; missing names the incomplete sections.
func transportRule(missing string) string {
	return "is not a loopback address, so etcd traffic on it needs TLS with client certificates: set " + missing +
		" with certFile, keyFile and caFile (etcdlet certs issue creates them from an etcd CA), or set etcd.insecure: true to accept traffic that anyone on the network can read and write"
}

const agentListenRule = "must be a loopback address unless agent.listenTLS sets certFile, keyFile and caFile (https with client certificates): /metrics and /pacemaker have no other authentication"

const metricsListenRule = "must be on a loopback address, or https with etcd.tls.client.caFile set so that etcd asks scrapers for a client certificate: the metrics listener has no other authentication"

// kubeadmTLS is a complete etcd.tls section (kubeadm's layout).
const kubeadmTLS = `  tls:
    client: {certFile: /etc/kubernetes/pki/etcd/server.crt, keyFile: /etc/kubernetes/pki/etcd/server.key, caFile: /etc/kubernetes/pki/etcd/ca.crt}
    peer: {certFile: /etc/kubernetes/pki/etcd/peer.crt, keyFile: /etc/kubernetes/pki/etcd/peer.key, caFile: /etc/kubernetes/pki/etcd/ca.crt}
`

// problems validates YAML as it is, without parseAndValidate's TLS.
func problems(t *testing.T, yaml string) []string {
	t.Helper()
	cfg, err := Parse([]byte(yaml))
	if err == nil {
		err = cfg.Validate()
	}
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

// No configuration that validates puts etcd on the network without TLS and
// client certificates, unless it says etcd.insecure.
func TestTransportSecurity(t *testing.T) {
	const static = "cluster:\n  name: etcd-main\nmembers:\n  source: static\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"plaintext on member IPs", static + "  addresses: [192.0.2.1, 192.0.2.2]\n", []string{
			`members.addresses[0]: "192.0.2.1": ` + transportRule("etcd.tls.client and etcd.tls.peer"),
		}},
		{"plaintext on IPv6 member IPs", static + "  addresses: ['2001:db8::1']\n", []string{
			`members.addresses[0]: "2001:db8::1": ` + transportRule("etcd.tls.client and etcd.tls.peer"),
		}},
		{"TLS without a CA checks no client certificates", static + "  addresses: [192.0.2.1]\netcd:\n  tls:\n" +
			"    client: {certFile: /pki/server.crt, keyFile: /pki/server.key}\n    peer: {certFile: /pki/peer.crt, keyFile: /pki/peer.key}\n", []string{
			`members.addresses[0]: "192.0.2.1": ` + transportRule("etcd.tls.client and etcd.tls.peer"),
		}},
		{"client TLS complete, peer plaintext", static + "  addresses: [192.0.2.1]\netcd:\n  tls:\n" +
			"    client: {certFile: /pki/server.crt, keyFile: /pki/server.key, caFile: /pki/ca.crt}\n", []string{
			`members.addresses[0]: "192.0.2.1": ` + transportRule("etcd.tls.peer"),
		}},
		{"node address off the host, list from a file", "cluster:\n  name: etcd-main\nmembers:\n  source: file\n  file: /etc/etcdlet/members\nnode:\n  address: 10.0.0.5\n", []string{
			`node.address: "10.0.0.5": ` + transportRule("etcd.tls.client and etcd.tls.peer"),
		}},
		{"seeds off the host, list from the cluster", "cluster:\n  name: etcd-main\nmembers:\n  source: cluster\n  seeds: [127.0.0.1, '2001:db8::7']\n", []string{
			`members.seeds[1]: "2001:db8::7": ` + transportRule("etcd.tls.client and etcd.tls.peer"),
		}},
		{"a loopback list needs no TLS", static + "  addresses: [127.0.0.1, 127.0.0.2, '::1']\n", nil},
		{"TLS with CAs on both sides", static + "  addresses: [192.0.2.1]\netcd:\n" + kubeadmTLS, nil},
		{"explicit opt-out", static + "  addresses: [192.0.2.1]\netcd:\n  insecure: true\n", nil},
		{"opt-out with complete TLS reads wrong", static + "  addresses: [192.0.2.1]\netcd:\n  insecure: true\n" + kubeadmTLS, []string{
			"etcd.insecure: true: must not be set when etcd.tls.client and etcd.tls.peer are complete: it would have no effect, and would read as if traffic were plaintext",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := problems(t, tt.yaml); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}

// A list read at run time is held to the same rule: the file source's
// addresses are not known when the configuration is validated.
func TestMembersFileNeedsTLSOffTheHost(t *testing.T) {
	dir := t.TempDir()
	members := filepath.Join(dir, "members")
	write := func(content string) {
		if err := os.WriteFile(members, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	load := func(etcd string) *Config {
		cfg, err := Parse([]byte("cluster:\n  name: etcd-main\nmembers:\n  source: file\n  file: " + members + "\n" + etcd))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	plain := load("")
	write("127.0.0.2\n127.0.0.3\n")
	if addrs, errs := plain.DesiredMembers(); len(errs) > 0 || len(addrs) != 2 {
		t.Fatalf("loopback list without TLS = %v, %v; want both addresses", addrs, errs)
	}
	write("127.0.0.2\n# the new host\n192.0.2.7\n")
	addrs, errs := plain.DesiredMembers()
	want := `members.file line 3: "192.0.2.7": ` + transportRule("etcd.tls.client and etcd.tls.peer")
	if addrs != nil || errs.Error() != want {
		t.Fatalf("list off the host without TLS = %v, %v; want nothing and %s", addrs, errs, want)
	}
	if addrs, errs := load("etcd:\n" + kubeadmTLS).DesiredMembers(); len(errs) > 0 || len(addrs) != 2 {
		t.Fatalf("list off the host with TLS = %v, %v; want both addresses", addrs, errs)
	}
	if addrs, errs := load("etcd:\n  insecure: true\n").DesiredMembers(); len(errs) > 0 || len(addrs) != 2 {
		t.Fatalf("list off the host with etcd.insecure = %v, %v; want both addresses", addrs, errs)
	}
}

// The agent's and etcd's metrics listeners stay on loopback unless they
// ask for client certificates.
func TestListenerSecurity(t *testing.T) {
	const head = "cluster:\n  name: etcd-main\nmembers:\n  source: static\n  addresses: [127.0.0.1]\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"agent on a member IP", head + "agent:\n  listen: 192.0.2.1:9479\n", []string{`agent.listen: "192.0.2.1:9479": ` + agentListenRule}},
		{"agent on every address", head + "agent:\n  listen: 0.0.0.0:9479\n", []string{`agent.listen: "0.0.0.0:9479": ` + agentListenRule}},
		{"agent on every IPv6 address", head + "agent:\n  listen: '[::]:9479'\n", []string{`agent.listen: "[::]:9479": ` + agentListenRule}},
		{"agent on localhost", head + "agent:\n  listen: localhost:9479\n", nil},
		{"agent on IPv6 loopback", head + "agent:\n  listen: '[::1]:9479'\n", nil},
		{"agent off the host with client certificates", head + "agent:\n  listen: 0.0.0.0:9479\n  listenTLS: {certFile: /pki/agent.crt, keyFile: /pki/agent.key, caFile: /pki/ca.crt}\n", nil},
		{"agent TLS without a CA", head + "agent:\n  listen: 0.0.0.0:9479\n  listenTLS: {certFile: /pki/agent.crt, keyFile: /pki/agent.key}\n", []string{
			`agent.listen: "0.0.0.0:9479": ` + agentListenRule,
			"agent.listenTLS.caFile: required with agent.listenTLS: the listener accepts only clients with a certificate signed by it",
		}},
		{"metrics on every address over http", head + "etcd:\n  listenMetricsURL: http://0.0.0.0:2381\n", []string{`etcd.listenMetricsURL: "http://0.0.0.0:2381": ` + metricsListenRule}},
		{"metrics off the host over https without a client CA", head + "etcd:\n  insecure: true\n  listenMetricsURL: https://192.0.2.1:2381\n  tls:\n    client: {certFile: /pki/server.crt, keyFile: /pki/server.key}\n", []string{
			`etcd.listenMetricsURL: "https://192.0.2.1:2381": ` + metricsListenRule,
		}},
		{"metrics off the host over https with a client CA", head + "etcd:\n  listenMetricsURL: https://192.0.2.1:2381\n" + kubeadmTLS, nil},
		{"metrics on loopback over http", head + "etcd:\n  listenMetricsURL: http://127.0.0.1:2381\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := problems(t, tt.yaml); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}

func TestInsecureExtraArgs(t *testing.T) {
	const head = "cluster:\n  name: etcd-main\nmembers:\n  source: static\n  addresses: [127.0.0.1]\netcd:\n"
	for _, flag := range []string{"enable-pprof", "peer-skip-client-san-verification", "unsafe-no-fsync", "tls-min-version", "cipher-suites", "cors", "host-whitelist"} {
		t.Run(flag, func(t *testing.T) {
			why, insecure := InsecureEtcdFlag(flag)
			if !insecure {
				t.Fatalf("%s is not listed as weakening security", flag)
			}
			yaml := head + "  extraArgs:\n    " + flag + ": 'x'\n"
			want := fmt.Sprintf(`etcd.extraArgs.%s: "x": weakens etcd's security: %s; list it in etcd.allowInsecureExtraArgs to set it anyway`, flag, why)
			if got := problems(t, yaml); strings.Join(got, "\n") != want {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), want)
			}
			allowed := yaml + "  allowInsecureExtraArgs: [" + flag + "]\n"
			if got := problems(t, allowed); got != nil {
				t.Errorf("allowed flag refused: %q", got)
			}
			cfg, err := Parse([]byte(allowed))
			if err != nil {
				t.Fatal(err)
			}
			if w := cfg.SecurityWarnings(); len(w) != 1 || !strings.Contains(w[0], "--"+flag) {
				t.Errorf("warnings = %q, want one naming --%s", w, flag)
			}
		})
	}
	t.Run("allowing a flag that needs no allowing", func(t *testing.T) {
		got := problems(t, head+"  allowInsecureExtraArgs: [snapshot-count]\n")
		if len(got) != 1 || !strings.HasPrefix(got[0], `etcd.allowInsecureExtraArgs[0]: "snapshot-count": must be one of cipher-suites, cors, enable-pprof,`) {
			t.Errorf("problems = %q", got)
		}
	})
}

func TestInsecureIsWarned(t *testing.T) {
	cfg, err := Parse([]byte("cluster:\n  name: etcd-main\nmembers:\n  source: static\n  addresses: [192.0.2.1]\netcd:\n  insecure: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.SecurityWarnings(); len(w) != 1 || !strings.HasPrefix(w[0], "etcd.insecure is set:") {
		t.Fatalf("warnings = %q, want the etcd.insecure warning", w)
	}
	secure, err := Parse([]byte("cluster:\n  name: etcd-main\nmembers:\n  source: static\n  addresses: [192.0.2.1]\netcd:\n" + kubeadmTLS))
	if err != nil {
		t.Fatal(err)
	}
	if w := secure.SecurityWarnings(); len(w) != 0 {
		t.Fatalf("warnings of a secure configuration = %q, want none", w)
	}
}

// A list longer than MaxMembers is refused as a whole, with one error,
// at a cost that does not grow with the list.
func TestMemberListCap(t *testing.T) {
	var nine, ten, huge strings.Builder
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&nine, "127.0.0.%d\n", i)
	}
	ten.WriteString(nine.String() + "127.0.0.10\n")
	for huge.Len() < MaxMembersFileBytes-32 {
		fmt.Fprintf(&huge, "127.0.%d.%d\n", huge.Len()/256%256, huge.Len()%256)
	}
	if entries, errs := ParseMembersFile([]byte(nine.String())); len(errs) > 0 || len(entries) != 9 {
		t.Fatalf("9 entries: %d entries, %v", len(entries), errs)
	}
	for _, tt := range []struct {
		name, content string
	}{{"ten", ten.String()}, {"a megabyte", huge.String()}} {
		t.Run(tt.name, func(t *testing.T) {
			n := strings.Count(tt.content, "\n")
			entries, errs := ParseMembersFile([]byte(tt.content))
			want := fmt.Sprintf(`members.file: "%d entries": must have at most 9 entries (etcd recommends at most 7 members: every write waits for a majority of them)`, n)
			if entries != nil || errs.Error() != want {
				t.Fatalf("got %d entries, %v; want none and %s", len(entries), errs, want)
			}
		})
	}
	var static []string
	for i := 1; i <= 10; i++ {
		static = append(static, fmt.Sprintf("127.0.0.%d", i))
	}
	got := problems(t, "cluster:\n  name: etcd-main\nmembers:\n  source: static\n  addresses: ["+strings.Join(static, ", ")+"]\n")
	want := `members.addresses: "10 entries": must have at most 9 entries (etcd recommends at most 7 members: every write waits for a majority of them)`
	if strings.Join(got, "\n") != want {
		t.Fatalf("problems = %q, want %s", got, want)
	}
	if got := problems(t, "cluster:\n  name: etcd-main\n  replicas: 11\nmembers:\n  source: static\n  addresses: [127.0.0.1]\n"); len(got) != 1 ||
		got[0] != "cluster.replicas: 11: must be between 1 and 9 when set (etcd recommends at most 7 members)" {
		t.Fatalf("problems = %q", got)
	}
}

// Files that decide what etcdlet trusts, runs or acts on are refused when
// someone other than root could have written them.
func TestTrustedInputs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("this test makes files owned by another user and needs root: run it as root (make test does)")
	}
	dir := t.TempDir()
	mkfile := func(name string, mode os.FileMode) string { return trusttest.File(t, filepath.Join(dir, name), mode) }

	t.Run("config file writable by group", func(t *testing.T) {
		p := mkfile("config-g.yaml", 0o664)
		_, err := Load(p)
		want := "config file " + p + ": " + p + " is writable by group (mode 0664)"
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("Load = %v, want an error starting %q", err, want)
		}
	})
	t.Run("config file owned by another user", func(t *testing.T) {
		p := mkfile("config-u.yaml", 0o600)
		if err := os.Chown(p, 4242, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "is owned by uid 4242, must be owned by root") {
			t.Fatalf("Load = %v, want the owner rule", err)
		}
	})
	t.Run("members file in a world-writable directory", func(t *testing.T) {
		p := mkfile("drop/members", 0o644)
		if err := os.Chmod(filepath.Dir(p), 0o777); err != nil {
			t.Fatal(err)
		}
		_, errs := ReadMembersFile(p)
		if len(errs) != 1 || errs[0].Path != "members.file" || !strings.Contains(errs[0].Rule, "must be a file only root can change: ") ||
			!strings.Contains(errs[0].Rule, filepath.Dir(p)+" is writable by others (mode 0777)") {
			t.Fatalf("ReadMembersFile = %v, want the directory named", errs)
		}
	})
	t.Run("certificates, keys and programs", func(t *testing.T) {
		cert := mkfile("pki/server.crt", 0o644)
		key := mkfile("pki/server.key", 0o644)
		ca := mkfile("pki/ca.crt", 0o666)
		fifo := filepath.Join(dir, "pki/peer.crt")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		crmMon := mkfile("bin/crm_mon", 0o755)
		if err := os.Chown(crmMon, 4242, 0); err != nil {
			t.Fatal(err)
		}
		cfg := &Config{}
		cfg.Etcd.TLS.Client = TLSFiles{CertFile: cert, KeyFile: key, CAFile: ca}
		cfg.Etcd.TLS.Peer = TLSFiles{CertFile: fifo, KeyFile: key, CAFile: ca}
		cfg.Pacemaker.Enabled, cfg.Pacemaker.CrmMon = true, crmMon
		done := make(chan error, 1)
		go func() { done <- cfg.CheckFiles() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("CheckFiles blocked on a named pipe")
		}
		want := []string{
			fmt.Sprintf(`etcd.tls.client.keyFile: %q: is readable by others (mode 0644): a private key or credential must be readable by root only (chmod o-r %s)`, key, key),
			fmt.Sprintf(`etcd.tls.client.caFile: %q: must be a file only root can change: %s: %s is writable by others (mode 0666)`, ca, ca, ca),
			fmt.Sprintf(`etcd.tls.peer.certFile: %q: is a named pipe, want a regular file`, fifo),
			fmt.Sprintf(`etcd.tls.peer.keyFile: %q: is readable by others`, key),
			fmt.Sprintf(`etcd.tls.peer.caFile: %q: must be a file only root can change`, ca),
			fmt.Sprintf(`pacemaker.crmMon: %q: must be a file only root can change: %s: %s is owned by uid 4242`, crmMon, crmMon, crmMon),
		}
		var got []string
		if err != nil {
			got = strings.Split(err.Error(), "\n")
		}
		if len(got) != len(want) {
			t.Fatalf("CheckFiles:\n  %s\nwant lines starting:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Errorf("line %d: %s\nwant it to start: %s", i, got[i], want[i])
			}
		}
	})
}
