package membership

import (
	"strings"
	"testing"
)

func TestWriteTargets(t *testing.T) {
	v := obs(1, member("192.0.2.2", 2), member("192.0.2.1", 1), member("192.0.2.3", 3, learner), member("192.0.2.4", 4, down),
		member("2001:db8::5", 5))
	targets := func(a Action) string { return strings.Join(WriteTargets(v, a), " ") }
	if got := targets(Action{Kind: ActionPromote, MemberID: 3}); got != "https://192.0.2.1:2379 https://192.0.2.2:2379 https://[2001:db8::5]:2379" {
		t.Errorf("targets: %s; want the leader first, then the other voters in raft", got)
	}
	if got := targets(Action{Kind: ActionRemove, MemberID: 1}); got != "https://192.0.2.2:2379 https://[2001:db8::5]:2379" {
		t.Errorf("targets removing the leader: %s; never the member being removed", got)
	}
	if got := targets(Action{Kind: ActionMoveLeader, TransfereeID: 2}); got != "https://192.0.2.1:2379" {
		t.Errorf("move-leader targets: %s; the leader only", got)
	}
}
