package manual

import (
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/membership"
)

// at is member n running etcd version, downgrading to target when set.
func at(n int, version, target string, learner bool, problem string) membership.Member {
	mem := m(n, learner, problem)
	mem.Health.Version, mem.Health.DowngradeTarget = version, target
	return mem
}

func TestDowngradeRules(t *testing.T) {
	healthy := []membership.Member{at(1, "3.7.3", "", false, ""), at(2, "3.7.3", "", false, ""), at(3, "3.7.1", "", false, "")}
	for _, tc := range []struct {
		name    string
		members []membership.Member
		action  DowngradeAction
		target  string
		wantErr string
	}{
		{"one minor down", healthy, DowngradeEnable, "3.6", ""},
		{"a patch given is dropped", healthy, DowngradeValidate, "3.6.9", ""},
		{"two minors down", healthy, DowngradeValidate, "3.5", "the cluster runs etcd 3.7, and etcd downgrades one minor at a time: the target must be 3.6"},
		{"the same minor", healthy, DowngradeValidate, "3.7", "the target must be 3.6"},
		{"another major", healthy, DowngradeValidate, "2.6", "the target must be 3.6"},
		// Mid-upgrade, the cluster version is the lowest minor that runs.
		{"mixed versions", []membership.Member{at(1, "3.7.3", "", false, ""), at(2, "3.6.5", "", false, "")}, DowngradeValidate, "3.6", "the cluster runs etcd 3.6"},
		{"enabled already", []membership.Member{at(1, "3.7.3", "3.6.0", false, ""), at(2, "3.7.3", "3.6.0", false, "")}, DowngradeValidate, "3.6",
			"a downgrade to 3.6 is enabled already"},
		{"a learner: validate answers", append(healthy, at(4, "3.7.3", "", true, "")), DowngradeValidate, "3.6", ""},
		{"a learner: enable refused", append(healthy, at(4, "3.7.3", "", true, "")), DowngradeEnable, "3.6", "is a learner"},
		{"a member down: enable refused", []membership.Member{healthy[0], healthy[1], at(3, "", "", false, "no answer within 2s")}, DowngradeEnable, "3.6",
			"is not healthy (no answer within 2s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			to, err := downgradeTarget(tc.target)
			if err != nil {
				t.Fatal(err)
			}
			err = checkDowngrade(tc.members, tc.action, to)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("got %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
}

func TestDowngradeTarget(t *testing.T) {
	for _, bad := range []string{"", "3", "v3.6", "three.six", "3.x"} {
		if _, err := downgradeTarget(bad); err == nil || !strings.Contains(err.Error(), "want a version MAJOR.MINOR") {
			t.Errorf("%q: %v, want refused naming the form", bad, err)
		}
	}
	if to, err := downgradeTarget("3.6.2"); err != nil || to.String() != "3.6" {
		t.Errorf("3.6.2: %v, %v; want 3.6", to, err)
	}
}
