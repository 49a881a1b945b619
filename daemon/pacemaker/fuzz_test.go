package pacemaker

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/corosync"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

// FuzzParseBuild runs arbitrary crm_mon-like XML through the whole pure
// pipeline: whatever pacemaker (or an attacker controlling its output)
// prints, the built status either is not built (unusable input) or passes
// the CRD's validation. One invalid field would make the API server reject
// the entire update.
func FuzzParseBuild(f *testing.F) {
	files, err := filepath.Glob("testdata/crm_mon/*.xml")
	if err != nil || len(files) == 0 {
		// Without the real documents as seeds the fuzzer starts from
		// nothing and the seed run proves nothing.
		f.Fatalf("no seed fixtures in testdata/crm_mon (%v); run testdata/generate.sh", err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	mapping := model.Mapping{
		Kubelet: model.Matcher{Agent: config.DefaultKubeletAgent},
		Etcd:    model.Matcher{Agent: config.DefaultEtcdAgent},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := crmmon.Parse(data, time.UTC)
		if err != nil || crmmon.Check(doc, 0) != nil {
			return
		}
		// Give every node an address, so that nodes are listed and their
		// conditions validated rather than omitted.
		var nodes []corosync.Node
		for i, n := range doc.Nodes {
			addr := netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)})
			nodes = append(nodes, corosync.Node{Name: n.Name, ID: fmt.Sprint(i), Addrs: []string{addr.String()}})
		}
		c := model.Build(model.Input{Doc: doc, Corosync: nodes}, mapping)
		st := status.Build(c, 2, nil, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		obj, err := status.ToObject(st, status.VersionV1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := status.Validate(obj, nil); err != nil {
			t.Fatalf("built status fails validation: %v", err)
		}
	})
}
