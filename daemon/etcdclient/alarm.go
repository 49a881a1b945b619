package etcdclient

import (
	"regexp"
	"strconv"
)

// Alarm is an alarm one member raised; etcd keeps them cluster-wide and
// every member reports all of them.
type Alarm struct {
	MemberID uint64
	Type     string
}

// The text form's spacing is not fixed (protobuf varies it on purpose).
var alarmPattern = regexp.MustCompile(`^\s*memberID:\s*(\d+)\s+alarm:\s*([A-Z_]+)\s*$`)

// ParseAlarm reads an alarm from a Status answer's errors, where etcd
// writes each as its AlarmMember's text form ("memberID:<decimal>
// alarm:NOSPACE").
func ParseAlarm(s string) (Alarm, bool) {
	m := alarmPattern.FindStringSubmatch(s)
	if m == nil {
		return Alarm{}, false
	}
	id, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		return Alarm{}, false
	}
	return Alarm{MemberID: id, Type: m[2]}, true
}
