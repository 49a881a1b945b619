package etcdflags

import (
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/features"
)

func TestApply(t *testing.T) {
	cfg := embed.NewConfig()
	err := Apply(cfg, map[string]string{
		"snapshot-count":                 "5000",
		"quota-backend-bytes":            "8589934592",
		"heartbeat-interval":             "250",
		"election-timeout":               "2500",
		"auto-compaction-mode":           "periodic",
		"watch-progress-notify-interval": "5s",
		"pre-vote":                       "false",
		"cipher-suites":                  "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SnapshotCount != 5000 || cfg.QuotaBackendBytes != 8<<30 || cfg.TickMs != 250 || cfg.ElectionMs != 2500 ||
		cfg.AutoCompactionMode != "periodic" || cfg.WatchProgressNotifyInterval != 5*time.Second || cfg.PreVote || len(cfg.CipherSuites) != 2 {
		t.Errorf("extra args not applied: %+v", cfg)
	}
}

// feature-gates reaches the server's gates: etcd reads the json field only
// from a config file, so setting it like the other flags would be a no-op.
func TestApplyFeatureGates(t *testing.T) {
	cfg := embed.NewConfig()
	if cfg.ServerFeatureGate.Enabled(features.InitialCorruptCheck) {
		t.Fatal("InitialCorruptCheck is on by default; the test proves nothing")
	}
	if err := Apply(cfg, map[string]string{"feature-gates": "InitialCorruptCheck=true"}); err != nil {
		t.Fatal(err)
	}
	if !cfg.ServerFeatureGate.Enabled(features.InitialCorruptCheck) {
		t.Error("feature-gates=InitialCorruptCheck=true was not applied to the embedded server")
	}
	for _, bad := range []string{"NoSuchGate=true", "InitialCorruptCheck=maybe"} {
		errs := Validate(map[string]string{"feature-gates": bad}, true)
		if len(errs) != 1 || !strings.Contains(errs.Error(), "etcd.extraArgs.feature-gates: \""+bad+"\"") {
			t.Errorf("feature-gates=%s: got %v, want one error naming the field and value", bad, errs)
		}
		if errs := Validate(map[string]string{"feature-gates": bad}, false); len(errs) != 0 {
			t.Errorf("lenient (a static pod's etcd may know other gates): feature-gates=%s refused: %v", bad, errs)
		}
	}
}

func TestValidate(t *testing.T) {
	args := map[string]string{
		"snapshot-count":     "many",
		"pre-vote":           "sometimes",
		"no-such-flag":       "1",
		"heartbeat-interval": "-1",
		"name":               "owned flags are reported by config validation, not twice",
	}
	errs := Validate(args, true)
	got := errs.Error()
	for _, want := range []string{
		`etcd.extraArgs.heartbeat-interval: "-1": must be a non-negative whole number`,
		`etcd.extraArgs.no-such-flag: "1": not a flag the embedded etcd server understands`,
		`etcd.extraArgs.pre-vote: "sometimes": must be true or false`,
		`etcd.extraArgs.snapshot-count: "many": must be a non-negative whole number`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if len(errs) != 4 {
		t.Errorf("got %d problems, want 4:\n%s", len(errs), got)
	}
}

func TestValidateLenient(t *testing.T) {
	// A static pod may run a newer etcd with flags this version lacks; the
	// types of the flags it knows are still checked.
	errs := Validate(map[string]string{"flag-of-a-newer-etcd": "x", "snapshot-count": "many"}, false)
	if len(errs) != 1 || errs[0].Path != "etcd.extraArgs.snapshot-count" {
		t.Errorf("lenient validation: %v", errs)
	}
}

func TestNamesConfigRejects(t *testing.T) {
	// Config validation reports these names (config.ExtraArgRule); Validate
	// must not report them a second time, and Apply must never set them.
	tests := []struct {
		name, value string
		applyErr    string
	}{
		{"--snapshot-count", "5", `etcd.extraArgs.--snapshot-count: "5": must be an etcd flag name without leading dashes, e.g. snapshot-count`},
		{"name", "other", `etcd.extraArgs.name: "other": etcdlet sets --name itself: derived from cluster.name and the node address`},
		{"config-file", "/etc/etcd/etcd.conf.yml", `etcd.extraArgs.config-file: "/etc/etcd/etcd.conf.yml": must not be set: etcd ignores every other flag when --config-file is set, so it would override everything etcdlet sets`},
		{"discovery-token", "x", `etcd.extraArgs.discovery-token: "x": must not be set: --discovery-token configures etcd's discovery, and membership comes from the member list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := map[string]string{tt.name: tt.value}
			for _, strict := range []bool{true, false} {
				if errs := Validate(args, strict); len(errs) != 0 {
					t.Errorf("Validate(strict=%v) reports it again: %v", strict, errs)
				}
			}
			cfg := embed.NewConfig()
			before := cfg.Name
			if err := Apply(cfg, args); err == nil || err.Error() != tt.applyErr {
				t.Errorf("Apply() = %v, want %s", err, tt.applyErr)
			}
			if cfg.Name != before {
				t.Errorf("Apply() changed the configuration: name %q", cfg.Name)
			}
		})
	}
}
