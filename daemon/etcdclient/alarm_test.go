package etcdclient_test

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/etcdlet/etcdlet/daemon/etcdclient"
)

func TestParseAlarm(t *testing.T) {
	// The text etcd writes into a Status answer's errors for each alarm:
	// its AlarmMember's String().
	for _, tt := range []struct {
		in   string
		want etcdclient.Alarm
		ok   bool
	}{
		{(&pb.AlarmMember{MemberID: 0x3452d601672a65c4, Alarm: pb.AlarmType_NOSPACE}).String(), etcdclient.Alarm{MemberID: 0x3452d601672a65c4, Type: "NOSPACE"}, true},
		{(&pb.AlarmMember{MemberID: 1, Alarm: pb.AlarmType_CORRUPT}).String(), etcdclient.Alarm{MemberID: 1, Type: "CORRUPT"}, true},
		{"etcdserver: no leader", etcdclient.Alarm{}, false},
		{"memberID:x alarm:NOSPACE", etcdclient.Alarm{}, false},
	} {
		got, ok := etcdclient.ParseAlarm(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseAlarm(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
