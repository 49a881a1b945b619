package node

import (
	"context"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/etcdversion"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	"github.com/etcdlet/etcdlet/daemon/runtime"
)

// versionedDir is a data dir whose backend recorded a cluster version.
type versionedDir struct {
	datadir.Dir
	version string
}

func (d versionedDir) ClusterVersion() (string, error) { return d.version, nil }

// The local member is not started with an etcd that the cluster version
// rules out: below it (etcd would stop at once, "invalid downgrade"), or
// more than one minor above it. The cluster version is what the data
// recorded, or for a join the lowest version of the running members.
func TestVersionProblem(t *testing.T) {
	v37 := etcdversion.Minor{Major: 3, Minor: 7}
	members := func(versions ...string) membership.View {
		v := membership.View{Reached: true}
		for _, ver := range versions {
			v.Members = append(v.Members, membership.Member{Health: membership.Health{Version: ver}})
		}
		return v
	}
	wal := datadir.Contents{WAL: true, Backend: true}
	tests := []struct {
		name     string
		server   etcdversion.Minor
		data     datadir.Contents
		recorded string
		view     membership.View
		running  bool
		refused  string
	}{
		{name: "data of the same minor", server: v37, data: wal, recorded: "3.7.0"},
		{name: "data of the minor before: an upgrade", server: v37, data: wal, recorded: "3.6.0"},
		{name: "data of a later minor", server: v37, data: wal, recorded: "3.8.0",
			refused: "the cluster version its data records is 3.8): etcd 3.7 cannot run a member of a cluster at version 3.8"},
		{name: "data two minors behind", server: v37, data: wal, recorded: "3.5.0", refused: "one minor version at a time"},
		{name: "data that recorded no version", server: v37, data: wal},
		// etcd records its minimum, 3.0, until it has decided the cluster
		// version (right after a start or a join): no version at all.
		{name: "data that recorded etcd's placeholder", server: v37, data: wal, recorded: "3.0.0"},
		{name: "a join to members of a later minor", server: v37, view: members("3.8.1", "3.8.1"),
			refused: "the lowest etcd version of the cluster's members is 3.8"},
		{name: "a join in the middle of an upgrade", server: v37, view: members("3.7.3", "3.6.11", "")},
		{name: "a restart on data of the minor before, beside members below its patch floor", server: v37, data: wal, recorded: "3.6.0",
			view: members("3.6.16", "3.6.5", ""), refused: "a rolling upgrade to 3.7 needs every 3.6 member at 3.6.11 or later first"},
		{name: "the first join of a minor upgrade, beside members below the patch floor", server: v37, view: members("3.6.16", "3.6.5"), refused: "which runs etcd 3.6.5"},
		{name: "a join once the upgrade is under way", server: v37, view: members("3.7.3", "3.6.5")},
		{name: "a running member is left alone", server: v37, data: wal, recorded: "3.8.0", running: true},
		{name: "an image whose version is not known", data: wal, recorded: "3.8.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &Node{Deps: Deps{Settings: Settings{EtcdVersion: tt.server},
				DataDir: versionedDir{Dir: datadir.Dir{Path: t.TempDir()}, version: tt.recorded}}}
			s := &Snapshot{Data: tt.data, View: tt.view, Runtime: runtime.Status{Running: tt.running}}
			expectVersionRefusal(t, n.versionProblem(s), tt.refused)
		})
	}
}

// A running member whose configuration now names another etcd minor (a
// new staticPod.image) is restarted on it only as far as the rules for a
// start allow it against the running cluster; otherwise it keeps running
// what it runs, and the refusal says both versions.
func TestVersionChangeProblem(t *testing.T) {
	v35, v36, v37 := etcdversion.Minor{Major: 3, Minor: 5}, etcdversion.Minor{Major: 3, Minor: 6}, etcdversion.Minor{Major: 3, Minor: 7}
	// The first member is this node's, whose data has the storage version
	// storage.
	self := identity.Member{Name: "etcd-main-192.0.2.1", PeerURL: "https://192.0.2.1:2380"}
	withStorage := func(storage string, reached bool, downgradeTo string, versions ...string) membership.View {
		v := membership.View{Reached: reached}
		for i, ver := range versions {
			m := membership.Member{Name: "etcd-main-" + ver, Health: membership.Health{Version: ver, DowngradeTarget: downgradeTo}}
			if i == 0 {
				m.PeerURLs, m.Health.StorageVersion = []string{self.PeerURL}, storage
			}
			v.Members = append(v.Members, m)
		}
		return v
	}
	members := func(reached bool, downgradeTo string, versions ...string) membership.View {
		return withStorage("", reached, downgradeTo, versions...)
	}
	tests := []struct {
		name       string
		want, runs etcdversion.Minor
		running    bool
		// pacemaker: pacemaker is configured, and the list names this
		// node and one more (a two-node cluster).
		pacemaker bool
		view      membership.View
		refused   string
	}{
		{name: "the same minor (a patch change)", want: v36, runs: v36, running: true, view: members(true, "", "3.6.16", "3.6.16")},
		{name: "a minor up, every member at the patch floor", want: v37, runs: v36, running: true, view: members(true, "", "3.6.16", "3.6.11", "3.6.12")},
		{name: "a minor up, a member below the patch floor", want: v37, runs: v36, running: true, view: members(true, "", "3.6.16", "3.6.5"),
			refused: "keeping the local member on etcd 3.6, not restarting it on 3.7: etcd 3.7 does not start beside member etcd-main-3.6.5, which runs etcd 3.6.5"},
		{name: "a minor up once the upgrade is under way", want: v37, runs: v36, running: true, view: members(true, "", "3.7.3", "3.6.5", "3.6.16")},
		{name: "a skipped minor", want: v37, runs: v35, running: true, view: members(true, "", "3.5.26", "3.5.26"),
			refused: "(the lowest etcd version of the cluster's members is 3.5): "},
		{name: "a minor down without a downgrade", want: v36, runs: v37, running: true, view: members(true, "", "3.7.3", "3.7.3"),
			refused: "etcd 3.6 cannot run a member of a cluster at version 3.7"},
		{name: "a minor down with the downgrade enabled, the data lowered", want: v36, runs: v37, running: true, view: withStorage("3.6.0", true, "3.6.0", "3.7.3", "3.7.3", "3.6.16")},
		{name: "a minor down with the downgrade enabled, the data not lowered yet", want: v36, runs: v37, running: true, view: withStorage("3.7.0", true, "3.6.0", "3.7.3", "3.7.3", "3.6.16"),
			refused: `its data's storage version is "3.7.0", and etcd 3.6 starts only on data that etcd lowered to 3.6`},
		{name: "two voters without pacemaker's fencing", want: v37, runs: v36, running: true, view: members(true, "", "3.6.16", "3.6.16"),
			refused: "the cluster has two voters, which lose their quorum while one restarts, and pacemaker does not fence this pair"},
		{name: "two voters fenced by pacemaker", want: v37, runs: v36, running: true, pacemaker: true, view: members(true, "", "3.6.16", "3.6.16")},
		{name: "no quorum: the versions cannot be checked", want: v37, runs: v36, running: true, view: members(false, "", "3.6.16"),
			refused: "the cluster does not answer with quorum"},
		{name: "not running: the start's rules apply instead", want: v37, runs: v35, view: members(true, "", "3.5.26")},
		{name: "what runs is not known (an operator's manifest, the embedded member)", want: v37, running: true, view: members(true, "", "3.5.26")},
		{name: "the configured image names no version", runs: v35, running: true, view: members(true, "", "3.5.26")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := &Node{Deps: Deps{Settings: Settings{EtcdVersion: tt.want}}}
			s := &Snapshot{Self: self, View: tt.view, Runtime: runtime.Status{Running: tt.running, Version: tt.runs}}
			if tt.pacemaker {
				n.Pacemaker = func() (*model.Cluster, string) { return nil, "" }
				n.ForceAlone = func(context.Context, string) (string, uint64, error) { return "", 0, nil }
				s.Desired = []identity.Member{self, {Name: "etcd-main-192.0.2.2", PeerURL: "https://192.0.2.2:2380"}}
			}
			expectVersionRefusal(t, n.versionChangeProblem(s), tt.refused)
		})
	}
}

// expectVersionRefusal fails unless p is the etcd-version refusal saying
// refused, or no refusal when refused is empty.
func expectVersionRefusal(t *testing.T, p localmember.Problem, refused string) {
	t.Helper()
	switch {
	case refused == "" && p.Reason != "":
		t.Fatalf("refused: %s", p.Reason)
	case refused != "" && (p.Refusal != localmember.RefuseEtcdVersion || !strings.Contains(p.Reason, refused)):
		t.Fatalf("got %+v, want refusal %s saying %q", p, localmember.RefuseEtcdVersion, refused)
	}
}
