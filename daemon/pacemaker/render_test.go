package pacemaker

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	etcdv1 "github.com/openshift/api/etcd/v1"
)

func TestRender(t *testing.T) {
	_, obj := pollFixture(t, "failed-monitor", nil)
	t.Run("table", func(t *testing.T) {
		var buf bytes.Buffer
		if err := Render(&buf, obj, FormatTable); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		for _, want := range []string{
			"cluster  False",
			"master-0  192.0.2.10",
			"master-1_redfish(Redfish)=True",
			"node master-1 resource Etcd Operational=False (Failed): monitor of etcd failed on master-1",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("table lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("json", func(t *testing.T) {
		var buf bytes.Buffer
		if err := Render(&buf, obj, FormatJSON); err != nil {
			t.Fatal(err)
		}
		var back etcdv1.PacemakerCluster
		if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
			t.Fatal(err)
		}
		if back.Name != "cluster" || back.APIVersion != "etcd.openshift.io/v1" || len(*back.Status.Nodes) != 2 {
			t.Errorf("decoded %+v", back.ObjectMeta)
		}
	})
	t.Run("unknown format", func(t *testing.T) {
		if err := Render(&bytes.Buffer{}, obj, "xml"); err == nil {
			t.Error("accepted format xml")
		}
	})
}
