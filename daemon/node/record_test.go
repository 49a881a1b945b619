package node

import (
	"testing"

	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/metrics"
)

// A refusal is counted once as it begins, however long it lasts and
// however its details change; again when it begins anew. Each endpoint
// answering for another cluster is a refusal of its own.
func TestRefusalsAreCountedAsTheyBegin(t *testing.T) {
	m := metrics.New("etcd-main")
	n := &Node{Deps: Deps{Metrics: m}}
	wait := func(reason string) Snapshot {
		return Snapshot{Decision: localmember.Decision{Kind: localmember.Wait, Reason: reason, Refusal: localmember.RefuseNoConsent}}
	}
	foreign := func(endpoints ...string) Snapshot {
		var s Snapshot
		for _, e := range endpoints {
			s.View.Foreign = append(s.View.Foreign, membership.Foreign{Endpoint: e, ClusterID: 0xf0})
		}
		return s
	}
	for _, s := range []Snapshot{
		wait("no answer from 192.0.2.2"), wait("no answer from 192.0.2.2, 192.0.2.3"), // one refusal
		{}, wait("no answer from 192.0.2.2"), // ended, began again
		foreign("https://192.0.2.2:2379", "https://192.0.2.3:2379"), foreign("https://192.0.2.2:2379"), // two
		foreign("https://192.0.2.2:2379", "https://192.0.2.4:2379"), // one more
		{Orphaning: "the list shares no address"}, {Orphaning: "the list shares no address"},
	} {
		n.recordRefusals(s)
	}
	want := map[string]float64{"bootstrap-no-consent": 2, "foreign-cluster-answer": 3, "orphaning-list": 1}
	got := map[string]float64{}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "etcdlet_refusals_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "reason" {
					got[l.GetValue()] = s.GetCounter().GetValue()
				}
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("etcdlet_refusals_total %v, want %v", got, want)
	}
	for reason, v := range want {
		if got[reason] != v {
			t.Errorf("etcdlet_refusals_total{reason=%q} = %v, want %v", reason, got[reason], v)
		}
	}
}
