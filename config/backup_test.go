package config

import (
	"slices"
	"strings"
	"testing"
)

func TestBackupSection(t *testing.T) {
	const base = "cluster:\n  name: etcd-main\nmembers:\n  source: static\n  addresses: [127.0.0.1]\nnode:\n  address: 127.0.0.1\n"
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
		{"keep no full snapshot", base + "backup:\n  store: {provider: local, directory: /b}\n  retention: {keepFull: 0}\n", []string{
			`backup.retention.keepFull: 0: must be at least 1: the newest full snapshot is never pruned`,
		}},
		{"plaintext API off loopback", "cluster:\n  name: etcd-main\nmembers:\n  source: file\n  file: /etc/etcdlet/members\nnode:\n  address: 192.0.2.1\netcd:\n  insecure: true\nbackup:\n  store: {provider: local, directory: /b}\n  api: {port: 8080, tls: {caFile: /ca.pem}}\n", []string{
			`backup.api.tls.caFile: "/ca.pem": not used: etcd-druid presents no client certificate`,
			`backup.api.tls: required off loopback (the API is served on the node address): set certFile and keyFile, or backup.api.insecure: true to serve plaintext`,
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
