package snapshot

import (
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// The JSON of one delta event, as BR writes it: its snapshotter marshals
// struct{EtcdEvent *clientv3.Event `json:"etcdEvent"`; Time time.Time
// `json:"time"`} with encoding/json, and in the etcd v3.5 BR builds with,
// clientv3.Event is the gogo/protobuf-generated mvccpb.Event, so the JSON
// is that struct's json tags: snake_case names, every field omitempty
// (a PUT has no "type", DELETE is "type":1), []byte as base64. etcd v3.7
// generates mvccpb with google.golang.org/protobuf, whose structs carry the
// same tags today; these mirror types pin the format here instead of
// leaving it to a code generator.
type brTimedEvent struct {
	EtcdEvent *brEvent  `json:"etcdEvent"`
	Time      time.Time `json:"time"`
}

type brEvent struct {
	Type   int32       `json:"type,omitempty"`
	Kv     *brKeyValue `json:"kv,omitempty"`
	PrevKv *brKeyValue `json:"prev_kv,omitempty"`
}

type brKeyValue struct {
	Key            []byte `json:"key,omitempty"`
	CreateRevision int64  `json:"create_revision,omitempty"`
	ModRevision    int64  `json:"mod_revision,omitempty"`
	Version        int64  `json:"version,omitempty"`
	Value          []byte `json:"value,omitempty"`
	Lease          int64  `json:"lease,omitempty"`
}

// marshalEvent is one element of the delta's JSON array. The time is when
// the event was received, in UTC (BR uses its local zone, UTC in its
// container).
func marshalEvent(ev *mvccpb.Event, t time.Time) ([]byte, error) {
	b, err := json.Marshal(brTimedEvent{
		EtcdEvent: &brEvent{Type: int32(ev.Type), Kv: toBRKeyValue(ev.Kv), PrevKv: toBRKeyValue(ev.PrevKv)},
		Time:      t.UTC(),
	})
	if err != nil {
		return nil, fmt.Errorf("marshal the event of revision %d: %w", ev.GetKv().GetModRevision(), err)
	}
	return b, nil
}

func toBRKeyValue(kv *mvccpb.KeyValue) *brKeyValue {
	if kv == nil {
		return nil
	}
	return &brKeyValue{
		Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
		Version: kv.Version, Value: kv.Value, Lease: kv.Lease,
	}
}

func fromBRKeyValue(kv *brKeyValue) *mvccpb.KeyValue {
	if kv == nil {
		return nil
	}
	return &mvccpb.KeyValue{
		Key: kv.Key, CreateRevision: kv.CreateRevision, ModRevision: kv.ModRevision,
		Version: kv.Version, Value: kv.Value, Lease: kv.Lease,
	}
}

// unmarshalEvents parses a delta's JSON array (without its sha256).
func unmarshalEvents(data []byte) ([]*mvccpb.Event, error) {
	var timed []brTimedEvent
	if err := json.Unmarshal(data, &timed); err != nil {
		return nil, fmt.Errorf("parse the events: %w", err)
	}
	events := make([]*mvccpb.Event, len(timed))
	for i, te := range timed {
		ev := te.EtcdEvent
		switch {
		case ev == nil:
			return nil, fmt.Errorf("event %d: no etcdEvent", i)
		case ev.Kv == nil:
			return nil, fmt.Errorf("event %d: no kv", i)
		case ev.Type != int32(mvccpb.Event_PUT) && ev.Type != int32(mvccpb.Event_DELETE):
			return nil, fmt.Errorf("event %d: unknown type %d", i, ev.Type)
		}
		events[i] = &mvccpb.Event{Type: mvccpb.Event_EventType(ev.Type), Kv: fromBRKeyValue(ev.Kv), PrevKv: fromBRKeyValue(ev.PrevKv)}
	}
	return events, nil
}
