package etcdversion

import (
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Minor
		ok   bool
	}{
		{"3.6.0", Minor{3, 6}, true},
		{"v3.7.3", Minor{3, 7}, true},
		{"3.5.26-0", Minor{3, 5}, true},
		{"3.10", Minor{3, 10}, true},
		{"latest", Minor{}, false},
		{"3", Minor{}, false},
		{"", Minor{}, false},
		{"3.x.1", Minor{}, false},
	}
	for _, tt := range tests {
		if got, ok := Parse(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("Parse(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParseRecorded(t *testing.T) {
	for in, want := range map[string]Minor{"3.6.0": {3, 6}, "3.5.0": {3, 5}, "3.0.0": {}, "3.4.0": {}, "": {}} {
		if got, ok := ParseRecorded(in); got != want || ok != !want.IsZero() {
			t.Errorf("ParseRecorded(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
}

func TestFromImage(t *testing.T) {
	tests := []struct {
		image string
		want  Minor
		ok    bool
	}{
		{"registry.k8s.io/etcd:3.6.5-0", Minor{3, 6}, true},
		{"quay.io/coreos/etcd:v3.5.26", Minor{3, 5}, true},
		{"registry.example:5000/etcd:3.7.3-0@sha256:0123", Minor{3, 7}, true},
		{"registry.example:5000/etcd", Minor{}, false},
		{"registry.example:5000/etcd@sha256:0123", Minor{}, false},
		{"etcd:latest", Minor{}, false},
	}
	for _, tt := range tests {
		if got, ok := FromImage(tt.image); got != tt.want || ok != tt.ok {
			t.Errorf("FromImage(%q) = %v, %v; want %v, %v", tt.image, got, ok, tt.want, tt.ok)
		}
	}
}

func TestLowest(t *testing.T) {
	if got, ok := Lowest("3.7.3", "", "3.6.5", "garbage", "3.7.0"); !ok || got != (Minor{3, 6}) {
		t.Errorf("Lowest = %v, %v; want 3.6", got, ok)
	}
	if _, ok := Lowest("", "unknown"); ok {
		t.Error("Lowest of nothing that parses is known")
	}
}

// etcd's rule: a server of a lower minor than the cluster version stops
// at once; an upgrade goes one minor at a time.
func TestCheckMember(t *testing.T) {
	tests := []struct {
		name            string
		server, cluster Minor
		refused         string
	}{
		{"the same minor", Minor{3, 7}, Minor{3, 7}, ""},
		{"one minor up: a rolling upgrade", Minor{3, 7}, Minor{3, 6}, ""},
		{"one minor down", Minor{3, 6}, Minor{3, 7}, "etcd 3.6 cannot run a member of a cluster at version 3.7: etcd runs no member below the cluster version"},
		{"a skipped minor", Minor{3, 7}, Minor{3, 5}, "etcd upgrades one minor version at a time; run etcd 3.6 on every member first"},
		{"another major", Minor{4, 0}, Minor{3, 7}, "another major version"},
		{"the cluster version not known", Minor{3, 7}, Minor{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckMember(tt.server, tt.cluster)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
				t.Fatalf("got %v, want a refusal with %q", err, tt.refused)
			}
		})
	}
}

func TestCheckPatchFloor(t *testing.T) {
	v36, v37 := Minor{3, 6}, Minor{3, 7}
	run := func(versions ...string) []RunningVersion {
		var out []RunningVersion
		for i, v := range versions {
			out = append(out, RunningVersion{Member: fmt.Sprintf("etcd-main-192.0.2.%d", i+1), Version: v})
		}
		return out
	}
	tests := []struct {
		name    string
		server  Minor
		running []RunningVersion
		refused string
	}{
		{"3.5 members at the floor", v36, run("3.5.26", "3.5.30"), ""},
		{"a 3.5 member below the floor", v36, run("3.5.26", "3.5.21"),
			"etcd 3.6 does not start beside member etcd-main-192.0.2.2, which runs etcd 3.5.21: a rolling upgrade to 3.6 needs every 3.5 member at 3.5.26 or later first"},
		{"the advisory is named", v36, run("3.5.19"), "zombie members"},
		{"halfway: members of both minors", v36, run("3.6.16", "3.5.26"), ""},
		// Refusing more members of the new minor would only cost members.
		{"under way already, below the floor", v37, run("3.7.3", "3.6.10"), ""},
		{"3.6 members below 3.7's floor", v37, run("3.6.16", "3.6.10"), "needs every 3.6 member at 3.6.11 or later first"},
		{"3.6 members at 3.7's floor", v37, run("3.6.11", "3.6.16"), ""},
		{"a patch upgrade within a minor has no floor", v36, run("3.6.1"), ""},
		{"a tag's suffix", v36, run("v3.5.21-0"), "3.5.21"},
		{"versions not known", v36, run("", "3.5"), ""},
		{"the server's version not known", Minor{}, run("3.5.1"), ""},
		{"a minor etcd names no floor for", Minor{3, 9}, run("3.8.0"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckPatchFloor(tt.server, tt.running)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.refused != "" && (err == nil || !strings.Contains(err.Error(), tt.refused)):
				t.Fatalf("got %v, want a refusal with %q", err, tt.refused)
			}
		})
	}
}
