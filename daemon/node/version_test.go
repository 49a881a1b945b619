package node

import (
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/etcdversion"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
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
			p := n.versionProblem(s)
			switch {
			case tt.refused == "" && p.Reason != "":
				t.Fatalf("refused: %s", p.Reason)
			case tt.refused != "" && (p.Refusal != localmember.RefuseEtcdVersion || !strings.Contains(p.Reason, tt.refused)):
				t.Fatalf("got %+v, want refusal %s saying %q", p, localmember.RefuseEtcdVersion, tt.refused)
			}
		})
	}
}
