package config

import (
	"slices"
	"strings"
	"testing"
)

func TestBackupSection(t *testing.T) {
	const base = "cluster:\n  name: etcd-main\nmembers:\n  source: static\n  addresses: [127.0.0.1]\nnode:\n  address: 127.0.0.1\n"
	const offLoopback = "cluster:\n  name: etcd-main\nmembers:\n  source: file\n  file: /etc/etcdlet/members\nnode:\n  address: 192.0.2.1\netcd:\n  insecure: true\nbackup:\n  store: {provider: local, directory: /b}\n"
	const s3 = "backup:\n  store:\n    provider: s3\n    s3: {bucket: b, credentialsDir: /etc/etcdlet/s3"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"no backup section", base, nil},
		{"local store, schedules and the API", base + "backup:\n  store: {provider: local, directory: /var/backups/etcd}\n  schedule: {full: 1h, delta: 1m}\n  api: {port: 8080}\n", nil},
		{"s3 store", base + s3 + ", endpoint: https://s3.example.com, forcePathStyle: true}\n  compression: zlib\n", nil},
		{"a schedule without a store", base + "backup:\n  schedule: {full: 1h}\n", []string{
			`backup.store.provider: required with backup.schedule or backup.api: local or s3`,
		}},
		{"unknown provider and compression", base + "backup:\n  store: {provider: gcs}\n  compression: zstd\n", []string{
			`backup.compression: "zstd": must be gzip, lzw, zlib or none`,
			`backup.store.provider: "gcs": must be local or s3 (or empty: no snapshots)`,
		}},
		{"local store in the data dir", base + "etcd:\n  dataDir: /var/lib/etcd\nbackup:\n  store: {provider: local, directory: /var/lib/etcd/backups}\n", []string{
			`backup.store.directory: "/var/lib/etcd/backups": must not be inside or contain etcd.dataDir (/var/lib/etcd): moving a data dir aside would take the snapshots with it`,
		}},
		{"s3 without bucket or credentials", base + "backup:\n  store: {provider: s3, s3: {credentialsDir: s3}}\n", []string{
			`backup.store.s3.bucket: required`,
			`backup.store.s3.credentialsDir: "s3": must be an absolute path`,
		}},
		{"plaintext s3 off loopback", base + s3 + ", endpoint: http://192.0.2.9:9000}\n", []string{
			`backup.store.s3.endpoint: "http://192.0.2.9:9000": must be https off loopback: snapshots hold every key (etcd.insecure allows plaintext)`,
		}},
		{"s3 endpoint with a path", base + s3 + ", endpoint: https://s3.example.com/bucket}\n", []string{
			`backup.store.s3.endpoint: "https://s3.example.com/bucket": must be an http or https URL with a host and no path, e.g. https://s3.example.com`,
		}},
		{"a delta schedule alone, tiny intervals", base + "backup:\n  store: {provider: local, directory: /b}\n  schedule: {delta: 1s}\n", []string{
			`backup.schedule.delta: "1s": must be 0 (off) or at least 10s`,
			`backup.schedule.delta: "1s": needs backup.schedule.full: a delta builds on the last full snapshot`,
		}},
		{"keep no full snapshot", base + "backup:\n  store: {provider: local, directory: /b}\n  retention: {policy: LimitBased, keepFull: 0}\n", []string{
			`backup.retention.keepFull: 0: must be at least 1: the newest full snapshot is never pruned`,
		}},
		{"a count with the exponential policy", base + "backup:\n  store: {provider: local, directory: /b}\n  retention: {keepFull: 7}\n", []string{
			`backup.retention.keepFull: 7: only used with backup.retention.policy LimitBased (the policy is Exponential)`,
		}},
		{"an unknown policy", base + "backup:\n  store: {provider: local, directory: /b}\n  retention: {policy: exponential}\n", []string{
			`backup.retention.policy: "exponential": must be Exponential or LimitBased`,
		}},
		{"plaintext API off loopback", offLoopback + "  api: {port: 8080, tls: {caFile: /ca.pem}}\n", []string{
			`backup.api.tls.caFile: "/ca.pem": needs certFile and keyFile: client certificates are asked for over https only`,
			`backup.api.tls: required off loopback (the API is served on the node address): set certFile and keyFile, or backup.api.insecure: true to serve plaintext`,
		}},
		{"https API off loopback without client authentication", offLoopback + "  api: {port: 8080, tls: {certFile: /c.pem, keyFile: /k.pem}}\n", []string{
			`backup.api: needs client authentication off loopback: tls.caFile (clients present a certificate signed by it) or allowedClients (the networks of the callers, e.g. etcd-druid's pod network, which presents no certificate), or backup.api.insecure: true to let anyone who reaches the port order snapshots`,
		}},
		{"https API off loopback with client certificates", offLoopback + "  api: {port: 8080, tls: {certFile: /c.pem, keyFile: /k.pem, caFile: /ca.pem}}\n", nil},
		{"https API off loopback for druid's pod network", offLoopback + "  api: {port: 8080, tls: {certFile: /c.pem, keyFile: /k.pem}, allowedClients: [10.244.0.0/16, 192.0.2.7, 'fd00:10:244::/56']}\n", nil},
		{"insecure API off loopback", offLoopback + "  api: {port: 8080, insecure: true}\n", nil},
		{"insecure although authenticated", offLoopback + "  api: {port: 8080, insecure: true, tls: {certFile: /c.pem, keyFile: /k.pem}, allowedClients: [10.0.0.0/8]}\n", []string{
			`backup.api.insecure: true: must not be set with https and client authentication (tls.caFile or allowedClients): it would have no effect, and would read as if the API were open`,
		}},
		{"allowed clients that are no networks, or every one", offLoopback + "  api: {port: 8080, tls: {certFile: /c.pem, keyFile: /k.pem}, allowedClients: [10.0.0.1/8, 0.0.0.0/0, '::/0', pods, 010.0.0.1, 'fe80::1%eth0', '2001:DB8::/32']}\n  retention: {policy: LimitBased}\n", []string{
			`backup.api.allowedClients[0]: "10.0.0.1/8": must be written as the network it means, 10.0.0.0/8`,
			`backup.api.allowedClients[1]: "0.0.0.0/0": allows every client: list the networks of the API's callers, or set backup.api.insecure: true to say that anyone may call it`,
			`backup.api.allowedClients[2]: "::/0": allows every client: list the networks of the API's callers, or set backup.api.insecure: true to say that anyone may call it`,
			`backup.api.allowedClients[3]: "pods": must be a network in CIDR notation (10.0.0.0/8, fd00::/64) or one address`,
			`backup.api.allowedClients[4]: "010.0.0.1": must be a network in CIDR notation (10.0.0.0/8, fd00::/64) or one address`,
			`backup.api.allowedClients[5]: "fe80::1%eth0": must be an address in canonical form (fe80::1) without a zone`,
			`backup.api.allowedClients[6]: "2001:DB8::/32": must be written as the network it means, 2001:db8::/32`,
		}},
		{"coalescing interval out of range", base + "backup:\n  store: {provider: local, directory: /b}\n  api: {port: 8080, minFullInterval: 2h}\n", []string{
			`backup.api.minFullInterval: "2h0m0s": must be between 0 and 1h`,
		}},
		{"task limits", base + "tasks:\n  lockTTL: 1s\n  requeueInterval: 1ms\n  snapshotTimeout: 1s\n  defrag: {threshold: 1.5}\n  compact: {retain: -1}\n", []string{
			`tasks.lockTTL: "1s": must be between 5s and 10m`,
			`tasks.requeueInterval: "1ms": must be between 100ms and 10m`,
			`tasks.defrag.threshold: 1.5: must be a fraction from 0 to 1`,
			`tasks.compact.retain: -1: must not be negative`,
			`tasks.snapshotTimeout: "1s": must be between 10s and 24h`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := parseAndValidate(t, tc.yaml)
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// backup.api.insecure is warned about at every start and in status where
// it opens something: off loopback.
func TestInsecureBackupAPIIsWarned(t *testing.T) {
	const api = "backup:\n  store: {provider: local, directory: /b}\n  api: {port: 8080, insecure: true}\n"
	for _, tc := range []struct {
		node string
		want int
	}{{"192.0.2.1", 1}, {"127.0.0.1", 0}} {
		cfg, err := Parse([]byte("cluster:\n  name: etcd-main\nmembers:\n  source: file\n  file: /m\nnode:\n  address: " + tc.node + "\n" + api))
		if err != nil {
			t.Fatal(err)
		}
		var backup []string
		for _, w := range cfg.SecurityWarnings() {
			if strings.HasPrefix(w, "backup.api.insecure is set: anyone who reaches port 8080") {
				backup = append(backup, w)
			}
		}
		if len(backup) != tc.want {
			t.Errorf("node %s: warnings %q, want %d about backup.api.insecure", tc.node, cfg.SecurityWarnings(), tc.want)
		}
	}
}
