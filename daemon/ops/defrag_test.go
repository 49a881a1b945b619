package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/daemon/ops"
	"github.com/etcdlet/etcdlet/daemon/runtime/embedded"
	"github.com/etcdlet/etcdlet/daemon/task"
)

// Enough to fragment a backend by a few MiB in a second under -race.
const (
	fragKeys  = 2000
	fragValue = 1024
)

var defragOpts = ops.DefragOptions{CatchUp: 20 * time.Second}

// defragOutput is the defrag task's output as the task API shows it.
type defragOutput struct {
	Members  []ops.MemberOutcome `json:"members"`
	Disarmed []string            `json:"disarmedNoSpace"`
}

func decode[T any](t testing.TB, output any) T {
	t.Helper()
	var v T
	b, err := json.Marshal(output)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("output %s: %v", b, err)
	}
	return v
}

func newDefrag(t testing.TB, s ops.Surveyor, params map[string]string, env task.Env) task.Handler {
	t.Helper()
	h, err := ops.NewDefragType(s, defragOpts, time.Minute).New(task.Task{ID: "defrag-1", Type: "defrag", Params: params}, env)
	if err != nil {
		t.Fatalf("new defrag handler with %v: %v", params, err)
	}
	return h
}

// execute calls Execute again while it asks to be requeued, as the runner
// does, up to a deadline.
func execute(t testing.TB, ctx context.Context, h task.Handler, within time.Duration) task.Result {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		res := h.Execute(ctx)
		if !res.Requeue {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("still requeued after %s: %s: %v", within, res.Code, res.Error)
		}
		t.Logf("requeued (%s): %v", res.Code, res.Error)
		time.Sleep(200 * time.Millisecond)
	}
}

func urlOf(members []*etcdtest.Member, id uint64) string {
	for _, m := range members {
		if m.ID() == id {
			return m.ClientURL
		}
	}
	return ""
}

// The rolling defragmentation of a healthy 3-member cluster: with
// threshold 0 every member is defragmented exactly once, the followers
// first and the leader last, after it handed leadership over (it is no
// longer the leader when its defragmentation starts), and each gives space
// back; with threshold 1 no member qualifies: all are skipped, none is
// defragmented and leadership stays where it is.
func TestRollingDefragOfAHealthyCluster(t *testing.T) {
	members := etcdtest.Start(t, 3)
	urls := etcdtest.ClientURLs(members)
	spy := newSpy(t)
	cli := client(t, spy, urls)
	tests := []struct {
		name       string
		threshold  string
		wantAction string
	}{
		{name: "threshold 0 defragments every member", threshold: "0", wantAction: "defragmented"},
		{name: "threshold 1 skips every member", threshold: "1", wantAction: "skipped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// given a fragmented backend on every member
			fragment(t, cli, spy, urls, "/frag/", fragKeys, fragValue, 0)
			lead := leaderOf(t, members)
			spy.reset()
			rec := &recorder{}
			h := newDefrag(t, surveyor(spy, urls), map[string]string{ops.ParamThreshold: tt.threshold}, rec.env(nil))

			// when
			ctx := context.Background()
			if res := h.Admit(ctx); res.Error != nil {
				t.Fatalf("admit: %s: %v", res.Code, res.Error)
			}
			res := execute(t, ctx, h, 30*time.Second)

			// then
			if res.Error != nil {
				t.Fatalf("execute: %s: %v", res.Code, res.Error)
			}
			defrags, moves, _ := spy.calls()
			out := decode[defragOutput](t, res.Output)
			var names []string
			for _, o := range out.Members {
				names = append(names, o.Member)
				if o.Action != tt.wantAction {
					t.Errorf("member %s: %s (%s), want %s", o.Member, o.Action, o.Reason, tt.wantAction)
				}
				if o.Action == "defragmented" && (o.After <= 0 || o.After >= o.Before) {
					t.Errorf("member %s: backend %d bytes before, %d after: no space given back", o.Member, o.Before, o.After)
				}
			}
			slices.Sort(names)
			if want := []string{"m0", "m1", "m2"}; !slices.Equal(names, want) {
				t.Errorf("output lists %v, want each member once: %v", names, want)
			}
			if tt.wantAction == "skipped" {
				if len(defrags) != 0 || len(moves) != 0 {
					t.Errorf("no member qualified, yet %d defragmentations and leadership moves from %v", len(defrags), moves)
				}
				if got := leaderOf(t, members); got != lead {
					t.Errorf("leadership moved from %x to %x though nothing was defragmented", lead, got)
				}
				return
			}
			var order []string
			for _, d := range defrags {
				order = append(order, d.Endpoint)
				if d.WasLeader {
					t.Errorf("%s was defragmented while it was the leader", d.Endpoint)
				}
			}
			sorted := slices.Sorted(slices.Values(order))
			if !slices.Equal(sorted, slices.Sorted(slices.Values(urls))) {
				t.Fatalf("defragmented %v, want each of %v exactly once", order, urls)
			}
			if leaderURL := urlOf(members, lead); order[len(order)-1] != leaderURL {
				t.Errorf("defragmented in the order %v; the leader %s was not last", order, leaderURL)
			}
			// (a retry after a requeue may ask again; only the old leader is asked)
			if leaderURL := urlOf(members, lead); len(moves) == 0 || slices.ContainsFunc(moves, func(m string) bool { return m != leaderURL }) {
				t.Errorf("leadership moves asked of %v, want them asked of the leader %s only", moves, leaderURL)
			}
		})
	}
}

// With one of three members down, no member can be defragmented without
// leaving the cluster below quorum for the time it stalls: the task is
// admitted (the cluster has quorum) but defragments nothing and waits
// (requeue) with ERR_WOULD_LOSE_QUORUM.
func TestRollingDefragWaitsRatherThanLoseQuorum(t *testing.T) {
	members := etcdtest.Start(t, 3)
	urls := etcdtest.ClientURLs(members)
	spy := newSpy(t)
	fragment(t, client(t, spy, urls), spy, urls, "/frag/", fragKeys/4, fragValue, 0)
	lead := leaderOf(t, members)
	// given a stopped follower
	for _, m := range members {
		if m.ID() != lead {
			m.Close()
			break
		}
	}
	spy.reset()
	rec := &recorder{}
	h := newDefrag(t, surveyor(spy, urls), map[string]string{ops.ParamThreshold: "0"}, rec.env(nil))
	ctx := context.Background()
	if res := h.Admit(ctx); res.Error != nil {
		t.Fatalf("admit: two of three voters answer, yet %s: %v", res.Code, res.Error)
	}

	// when
	res := h.Execute(ctx)

	// then
	if !res.Requeue || res.Code != ops.CodeWouldLoseQuorum || res.Error == nil {
		t.Fatalf("execute: requeue %v, code %q, error %v; want a requeue with %s", res.Requeue, res.Code, res.Error, ops.CodeWouldLoseQuorum)
	}
	defrags, moves, _ := spy.calls()
	if len(defrags) != 0 || len(moves) != 0 {
		t.Errorf("defragmented %v and moved leadership from %v with a member down", defrags, moves)
	}
	if cp := rec.lastCheckpoint(); cp != nil {
		t.Errorf("checkpointed %s though no member was done", cp)
	}
}

// A run interrupted after its first member resumes from the checkpoint:
// the second run defragments only the remaining members, never the first
// one again, and its output still lists all three.
func TestRollingDefragResumesFromItsCheckpoint(t *testing.T) {
	members := etcdtest.Start(t, 3)
	urls := etcdtest.ClientURLs(members)
	spy := newSpy(t)
	fragment(t, client(t, spy, urls), spy, urls, "/frag/", fragKeys, fragValue, 0)
	params := map[string]string{ops.ParamThreshold: "0"}

	// given a first run stopped (its context cancelled, as when the agent
	// stops) when it was about to start on its second member
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spy.reset()
	spy.beforeDefrag = func(forwarded int, _ string) error {
		if forwarded == 1 {
			cancel()
			return ctx.Err()
		}
		return nil
	}
	first := &recorder{}
	h := newDefrag(t, surveyor(spy, urls), params, first.env(nil))
	if res := h.Admit(ctx); res.Error != nil {
		t.Fatalf("admit: %s: %v", res.Code, res.Error)
	}
	if res := h.Execute(ctx); res.Error == nil && !res.Requeue {
		t.Fatalf("the interrupted run reported success: %s", res.Description)
	}
	done, _, _ := spy.calls()
	if len(done) != 1 {
		t.Fatalf("the first run defragmented %v, want one member", done)
	}
	progress := first.lastCheckpoint()
	if progress == nil {
		t.Fatal("the first run checkpointed nothing after its first member")
	}
	var cp struct {
		Done []ops.MemberOutcome `json:"done"`
	}
	if err := json.Unmarshal(progress, &cp); err != nil || len(cp.Done) != 1 || cp.Done[0].Action != "defragmented" {
		t.Fatalf("the checkpoint %s (%v) does not record one defragmented member", progress, err)
	}

	// when a new handler (a restarted agent) runs with that progress
	spy.reset()
	second := &recorder{}
	h = newDefrag(t, surveyor(spy, urls), params, second.env(progress))
	res := execute(t, context.Background(), h, 30*time.Second)

	// then
	if res.Error != nil {
		t.Fatalf("execute: %s: %v", res.Code, res.Error)
	}
	again, _, _ := spy.calls()
	var order []string
	for _, d := range again {
		order = append(order, d.Endpoint)
	}
	if slices.Contains(order, done[0].Endpoint) {
		t.Errorf("the resumed run defragmented %s again (order %v)", done[0].Endpoint, order)
	}
	if len(order) != 2 || order[0] == order[1] {
		t.Errorf("the resumed run defragmented %v, want each of the two remaining members once", order)
	}
	out := decode[defragOutput](t, res.Output)
	if len(out.Members) != 3 {
		t.Errorf("output %+v, want all three members", out.Members)
	}
	for _, o := range out.Members {
		if o.Action != "defragmented" {
			t.Errorf("member %s: %s, want defragmented", o.Member, o.Action)
		}
	}
}

// A one- or two-member cluster has no quorum while one member
// defragments: the task is rejected unless allowUnavailable accepts that
// writes stall; then the single member is defragmented.
func TestDefragOfASingleMemberNeedsAllowUnavailable(t *testing.T) {
	members := etcdtest.Start(t, 1)
	urls := etcdtest.ClientURLs(members)
	spy := newSpy(t)
	cli := client(t, spy, urls)
	tests := []struct {
		name      string
		params    map[string]string
		wantCode  string // admission refused with this code; "" admitted
		wantDefrs int
	}{
		{name: "rejected by default", params: map[string]string{}, wantCode: ops.CodeWouldLoseQuorum},
		{name: "rejected with allowUnavailable=false", params: map[string]string{ops.ParamAllowUnavailable: "false"}, wantCode: ops.CodeWouldLoseQuorum},
		{name: "defragmented with allowUnavailable=true", params: map[string]string{ops.ParamAllowUnavailable: "true", ops.ParamThreshold: "0"}, wantDefrs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fragment(t, cli, spy, urls, "/frag/", fragKeys/4, fragValue, 0)
			spy.reset()
			h := newDefrag(t, surveyor(spy, urls), tt.params, (&recorder{}).env(nil))
			ctx := context.Background()

			res := h.Admit(ctx)

			if tt.wantCode != "" {
				if res.Error == nil || res.Code != tt.wantCode {
					t.Fatalf("admit: code %q, error %v; want a rejection with %s", res.Code, res.Error, tt.wantCode)
				}
				if !strings.Contains(res.Error.Error(), ops.ParamAllowUnavailable) {
					t.Errorf("the rejection %q does not say how to accept it (%s)", res.Error, ops.ParamAllowUnavailable)
				}
				return
			}
			if res.Error != nil {
				t.Fatalf("admit: %s: %v", res.Code, res.Error)
			}
			if res := execute(t, ctx, h, 30*time.Second); res.Error != nil {
				t.Fatalf("execute: %s: %v", res.Code, res.Error)
			}
			if defrags, moves, _ := spy.calls(); len(defrags) != tt.wantDefrs || len(moves) != 0 {
				t.Errorf("defragmented %v, moved leadership from %v; want %d defragmentations, no move", defrags, moves, tt.wantDefrs)
			}
		})
	}
}

// Bad parameters are refused when the task is created, naming the
// parameter.
func TestDefragRejectsBadParameters(t *testing.T) {
	s := surveyor(nil, nil) // never called: the parameters are checked first
	tests := []struct {
		name   string
		params map[string]string
		want   string
	}{
		{name: "threshold not a number", params: map[string]string{ops.ParamThreshold: "half"}, want: ops.ParamThreshold},
		{name: "threshold below 0", params: map[string]string{ops.ParamThreshold: "-0.1"}, want: ops.ParamThreshold},
		{name: "threshold above 1", params: map[string]string{ops.ParamThreshold: "1.5"}, want: ops.ParamThreshold},
		{name: "threshold NaN", params: map[string]string{ops.ParamThreshold: "NaN"}, want: ops.ParamThreshold},
		{name: "allowUnavailable not a bool", params: map[string]string{ops.ParamAllowUnavailable: "maybe"}, want: ops.ParamAllowUnavailable},
		{name: "unknown parameter", params: map[string]string{"treshold": "0.5"}, want: "treshold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ops.NewDefragType(s, defragOpts, time.Minute).New(task.Task{ID: "defrag-1", Type: "defrag", Params: tt.params}, (&recorder{}).env(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("params %v: error %v, want one naming %q", tt.params, err, tt.want)
			}
		})
	}
}

// A cluster that ran out of space (NOSPACE alarm: read-only) is recovered
// by the compaction and the defragmentation tasks: once the backend has
// room again the defragmentation disarms the alarm and writes succeed.
func TestCompactAndDefragRecoverFromANoSpaceAlarm(t *testing.T) {
	const quota = 1 << 20
	// given a single member with a 1 MiB quota, filled until etcd raises
	// the NOSPACE alarm
	spec := etcdtest.SingleSpec(t)
	spec.ExtraArgs = map[string]string{"quota-backend-bytes": strconv.Itoa(quota)}
	e, err := embedded.Start(spec, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		t.Fatal("the member was not ready within 30s")
	}
	urls := []string{spec.AdvertiseClientURL}
	spy := newSpy(t)
	cli := client(t, spy, urls)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fillUntilNoSpace(t, ctx, cli, urls[0], quota)
	alarms, err := spy.AlarmList(ctx, urls[0])
	if err != nil || len(alarms) != 1 || alarms[0].Alarm != pb.AlarmType_NOSPACE {
		t.Fatalf("alarms %v (%v), want NOSPACE", alarms, err)
	}
	s := surveyor(spy, urls)

	// when the keyspace is compacted and the member defragmented
	compact, err := ops.NewCompactType(s, 0, time.Minute).New(task.Task{ID: "compact-1", Type: "compact"}, (&recorder{}).env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if res := compact.Admit(ctx); res.Error != nil {
		t.Fatalf("compact admit: %s: %v", res.Code, res.Error)
	}
	if res := execute(t, ctx, compact, 10*time.Second); res.Error != nil || decode[ops.CompactOutcome](t, res.Output).CompactedTo == 0 {
		t.Fatalf("compact: %+v: %v", res.Output, res.Error)
	}
	defrag := newDefrag(t, s, map[string]string{ops.ParamAllowUnavailable: "true", ops.ParamThreshold: "0"}, (&recorder{}).env(nil))
	if res := defrag.Admit(ctx); res.Error != nil {
		t.Fatalf("defrag admit: a NOSPACE alarm is what the defragmentation is for, yet %s: %v", res.Code, res.Error)
	}
	res := execute(t, ctx, defrag, 15*time.Second)

	// then
	if res.Error != nil {
		t.Fatalf("defrag: %s: %v", res.Code, res.Error)
	}
	if out := decode[defragOutput](t, res.Output); !slices.Equal(out.Disarmed, []string{"m0"}) {
		t.Errorf("output says disarmed %v, want [m0]", out.Disarmed)
	}
	if alarms, err := spy.AlarmList(ctx, urls[0]); err != nil || len(alarms) != 0 {
		t.Errorf("alarms after the defragmentation: %v (%v), want none", alarms, err)
	}
	if _, err := cli.Put(ctx, "/after", "writable again"); err != nil {
		t.Errorf("a write after the recovery: %v", err)
	}
}

// fillUntilNoSpace writes 64 KiB values until etcd refuses one with
// NOSPACE. etcd checks its quota against the backend's size as of the last
// commit of its batch (every 100 ms by default), so how many puts that takes
// depends on the machine's speed: a count of puts is no bound. The bound is
// etcd's own accounting instead: once Status reports a committed size at the
// quota, the next put must be refused; the context's deadline bounds the rest.
func fillUntilNoSpace(t *testing.T, ctx context.Context, cli *clientv3.Client, url string, quota int64) {
	t.Helper()
	value := strings.Repeat("v", 64<<10)
	for i := 0; ; i++ {
		st, err := cli.Status(ctx, url)
		if err != nil {
			t.Fatalf("status after %d puts: %v", i, err)
		}
		_, err = cli.Put(ctx, "/fill", value)
		if errors.Is(err, rpctypes.ErrNoSpace) {
			return
		}
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		if st.DbSize >= quota {
			t.Fatalf("put %d of %d bytes accepted although etcd reported a backend of %d bytes against a quota of %d", i, len(value), st.DbSize, quota)
		}
	}
}
