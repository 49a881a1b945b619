package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The default configuration the packages install (packaging/config.yaml)
// is not a working cluster: it parses (no unknown fields, every value of
// the right type), and validation refuses it with exactly the fields an
// operator must fill in, each saying what goes there. Once those are
// filled in it is valid; the transport rule then asks for TLS for member
// addresses off the host.
func TestPackagedDefaultConfig(t *testing.T) {
	data, err := os.ReadFile("../packaging/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data)
	if err != nil {
		t.Fatalf("the packaged default configuration does not parse:\n%v", err)
	}
	var got []string
	if errs, ok := cfg.Validate().(Errors); ok {
		for _, e := range errs {
			got = append(got, e.Error())
		}
	}
	want := []string{
		"cluster.name: required: the member name prefix, e.g. etcd-main",
		"members.addresses: required with members.source static: list at least one member IP",
	}
	if !slices.Equal(got, want) {
		t.Errorf("validation of the packaged default configuration:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The packaged default is the built-in one: data dir and state dir side
	// by side in /var/lib/etcdlet, the unit's StateDirectory=, so that a
	// copy moved aside is renamed into a writable directory.
	if cfg.Etcd.Runtime != RuntimeEmbedded || cfg.Etcd.DataDir != DefaultDataDir || cfg.Agent.StateDir != DefaultStateDir ||
		filepath.Dir(DefaultDataDir) != "/var/lib/etcdlet" || filepath.Dir(DefaultStateDir) != "/var/lib/etcdlet" {
		t.Errorf("the packaged default names runtime %s, data dir %s, state dir %s: want embedded, %s and %s, both in /var/lib/etcdlet",
			cfg.Etcd.Runtime, cfg.Etcd.DataDir, cfg.Agent.StateDir, DefaultDataDir, DefaultStateDir)
	}

	// Snapshots are on by default (as k3s takes them): every 12 h into a
	// directory beside the data dir, not inside it, kept by age.
	if b := cfg.Backup; !b.SnapshotsEnabled() || b.Store.Provider != ProviderLocal || filepath.Dir(b.Store.Directory) != "/var/lib/etcdlet" ||
		b.Schedule.Full != 12*time.Hour || b.Retention.MaxAge <= 0 {
		t.Errorf("the packaged default's backup section is %+v: want a local store in /var/lib/etcdlet, a full snapshot every 12h, an age limit", b)
	}

	filled := func(addresses string) string {
		s := strings.Replace(string(data), "\n  name: \"\"\n", "\n  name: etcd-main\n", 1)
		return strings.Replace(s, "\n  addresses: []\n", "\n  addresses: "+addresses+"\n", 1)
	}
	cfg, err = Parse([]byte(filled("[127.0.0.1]")))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("the packaged default with a name and a loopback member does not validate:\n%v", err)
	}
	cfg, err = Parse([]byte(filled("[192.0.2.10, 192.0.2.11, 192.0.2.12]")))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "etcdlet certs issue") {
		t.Errorf("the packaged default with members off the host: got %v, want the transport rule pointing to etcdlet certs issue", err)
	}
}
