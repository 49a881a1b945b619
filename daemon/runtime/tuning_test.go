package runtime

import (
	"maps"
	"slices"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/etcdversion"
)

// Each etcd gets the tuning in the names it knows, and a flag that
// extraArgs sets under either name is left to it: etcd 3.6 refuses a
// flag given under both names, 3.5 and 3.7 each know only one of them.
func TestWithTuning(t *testing.T) {
	v35, v36, v37 := etcdversion.Minor{Major: 3, Minor: 5}, etcdversion.Minor{Major: 3, Minor: 6}, etcdversion.Minor{Major: 3, Minor: 7}
	for _, tc := range []struct {
		name    string
		version etcdversion.Minor
		extra   map[string]string
		want    map[string]string
	}{
		{"3.7", v37, nil, Tuning},
		{"3.6", v36, nil, Tuning},
		{"not known (an image by digest): the current names", etcdversion.Minor{}, nil, Tuning},
		{"3.5", v35, nil, TuningBefore36},
		{"3.5, the interval set in extraArgs", v35, map[string]string{"experimental-watch-progress-notify-interval": "1s"}, map[string]string{
			"experimental-watch-progress-notify-interval": "1s", "experimental-initial-corrupt-check": "true", "snapshot-count": "10000"}},
		{"3.6, the interval set under its old name", v36, map[string]string{"experimental-watch-progress-notify-interval": "1s"}, map[string]string{
			"experimental-watch-progress-notify-interval": "1s", "feature-gates": "InitialCorruptCheck=true", "snapshot-count": "10000"}},
		{"3.6, the corruption check set under its old name", v36, map[string]string{"experimental-initial-corrupt-check": "false"}, map[string]string{
			"experimental-initial-corrupt-check": "false", "watch-progress-notify-interval": "5s", "snapshot-count": "10000"}},
		{"3.7, feature gates of the operator's own", v37, map[string]string{"feature-gates": "StopGRPCServiceOnDefrag=true", "snapshot-count": "5000"}, map[string]string{
			"feature-gates": "StopGRPCServiceOnDefrag=true", "watch-progress-notify-interval": "5s", "snapshot-count": "5000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before map[string]string
			if tc.extra != nil {
				before = maps.Clone(tc.extra)
			}
			got := WithTuning(tc.version, tc.extra)
			if !maps.Equal(got, tc.want) {
				t.Errorf("flags %v, want %v", sorted(got), sorted(tc.want))
			}
			if !maps.Equal(before, tc.extra) {
				t.Errorf("extraArgs changed: %v", tc.extra)
			}
		})
	}
}

func sorted(m map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}
