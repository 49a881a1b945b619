package snapshot

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// goldenEvents are three events as BR's snapshotter writes them: a PUT
// (no "type"), an update with an empty value and a lease (no "value"), and
// a DELETE ("type":1, only key and mod_revision).
var goldenEvents = []struct {
	ev *mvccpb.Event
	at time.Time
}{
	{&mvccpb.Event{Kv: &mvccpb.KeyValue{Key: []byte("foo"), CreateRevision: 5, ModRevision: 5, Version: 1, Value: []byte("bar")}},
		time.Date(2025, 11, 24, 16, 0, 1, 500_000_000, time.UTC)},
	{&mvccpb.Event{Kv: &mvccpb.KeyValue{Key: []byte("/registry/leases/a b"), CreateRevision: 5, ModRevision: 6, Version: 2, Value: []byte{}, Lease: 7587883301234567890}},
		time.Date(2025, 11, 24, 16, 0, 2, 1, time.UTC)},
	{&mvccpb.Event{Type: mvccpb.Event_DELETE, Kv: &mvccpb.KeyValue{Key: []byte("foo"), ModRevision: 7}},
		time.Date(2025, 11, 24, 17, 0, 3, 0, time.FixedZone("CET", 3600))},
}

const (
	goldenJSON = `[{"etcdEvent":{"kv":{"key":"Zm9v","create_revision":5,"mod_revision":5,"version":1,"value":"YmFy"}},"time":"2025-11-24T16:00:01.5Z"},` +
		`{"etcdEvent":{"kv":{"key":"L3JlZ2lzdHJ5L2xlYXNlcy9hIGI=","create_revision":5,"mod_revision":6,"version":2,"lease":7587883301234567890}},"time":"2025-11-24T16:00:02.000000001Z"},` +
		`{"etcdEvent":{"type":1,"kv":{"key":"Zm9v","mod_revision":7}},"time":"2025-11-24T16:00:03Z"}]`
	goldenSHA = "5f1686e027e3c730f6d3bb456af85b977a2a2435a84dd337769298c1f11d20c8"
)

func TestDeltaContentGolden(t *testing.T) {
	var buf bytes.Buffer
	dw := newDeltaWriter(&buf)
	for _, g := range goldenEvents {
		if err := dw.add(g.ev, g.at); err != nil {
			t.Fatal(err)
		}
	}
	if err := dw.close(); err != nil {
		t.Fatal(err)
	}
	sum, _ := hex.DecodeString(goldenSHA)
	want := append([]byte(goldenJSON), sum...)
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("got\n%q\nwant\n%q", buf.Bytes(), want)
	}
}

func TestUnmarshalEvents(t *testing.T) {
	// BR writes times in its local zone; an offset parses the same.
	events, err := unmarshalEvents([]byte(strings.Replace(goldenJSON, "16:00:03Z", "17:00:03+01:00", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != len(goldenEvents) {
		t.Fatalf("%d events", len(events))
	}
	for i, ev := range events {
		want := proto.CloneOf(goldenEvents[i].ev)
		if len(want.Kv.Value) == 0 {
			want.Kv.Value = nil // omitted, as BR omits it
		}
		if !proto.Equal(ev, want) {
			t.Errorf("event %d: %v, want %v", i, ev, want)
		}
	}

	for _, tc := range []struct{ name, json, err string }{
		{"not an array", `{}`, "parse the events"},
		{"no etcdEvent", `[{"time":"2025-11-24T16:00:03Z"}]`, "event 0: no etcdEvent"},
		{"no kv", `[{"etcdEvent":{"type":1}}]`, "event 0: no kv"},
		{"unknown type", `[{"etcdEvent":{"type":2,"kv":{"key":"Zm9v"}}}]`, "event 0: unknown type 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := unmarshalEvents([]byte(tc.json)); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// TestMvccpbJSONShape checks what the mirror types in event.go claim: that
// encoding/json renders etcd v3.7's mvccpb.Event (google protobuf) with the
// same names as the gogo-generated one BR marshals. If a new etcd changes
// that, BR's format still holds here, and this test says why it moved.
func TestMvccpbJSONShape(t *testing.T) {
	for i, g := range goldenEvents {
		direct, err := json.Marshal(g.ev)
		if err != nil {
			t.Fatal(err)
		}
		ours, err := json.Marshal(&brEvent{Type: int32(g.ev.Type), Kv: toBRKeyValue(g.ev.Kv)})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(direct, ours) {
			t.Errorf("event %d: encoding/json of mvccpb.Event is\n%s\nBR's shape is\n%s", i, direct, ours)
		}
	}
}
