package campaign

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Why not etcd's own robustness model (go.etcd.io/etcd/tests/v3/
// robustness/model): it checks every response's revision against a model
// of the whole keyspace, so it needs a cluster where only the checked
// clients write. etcdlet's agents write into the same keyspace (their
// writer lock, their posts), which bumps the revision between any two of
// the clients' writes. The campaign therefore checks each key as a
// register with compare-and-swap (porcupine, partitioned by key), and the
// revisions separately: they never go backwards in real time.

// Kinds of client operations.
const (
	opPut    = "put"
	opGet    = "get"
	opDelete = "delete"
	opCAS    = "cas" // a transaction: put Value if the key holds Expect
)

// input is a client's request.
type input struct {
	Kind   string
	Key    string
	Value  string // put, cas: the value written (unique in the campaign)
	Expect string // cas: the value compared ("": the key is absent)
}

// output is what came back. Unknown: the call failed or timed out, so it
// may or may not have taken effect (its return is set to the end of
// time: it may take effect any time after its call).
type output struct {
	Unknown   bool
	Value     string // get: the value read ("": absent); cas failed: the value found
	Deleted   bool   // delete: a key was deleted
	Succeeded bool   // cas
	Revision  int64  // the response header's revision
}

// registerModel is one key as a register: the state is its value ("" when
// absent).
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(input).Key
			byKey[k] = append(byKey[k], op)
		}
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, byKey[k])
		}
		return parts
	},
	Init: func() any { return "" },
	Step: func(state, in, out any) (bool, any) {
		v, i, o := state.(string), in.(input), out.(output)
		switch i.Kind {
		case opPut:
			return true, i.Value
		case opGet:
			return o.Value == v, v
		case opDelete:
			if o.Unknown {
				return true, ""
			}
			return o.Deleted == (v != ""), ""
		case opCAS:
			match := v == i.Expect
			switch {
			case o.Unknown && match:
				return true, i.Value
			case o.Unknown:
				return true, v
			case match:
				return o.Succeeded, i.Value
			default:
				return !o.Succeeded && o.Value == v, v
			}
		}
		return false, v
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		switch {
		case o.Unknown:
			return fmt.Sprintf("%s(%s %s) -> unknown", i.Kind, i.Key, i.Value)
		case i.Kind == opGet:
			return fmt.Sprintf("get(%s) -> %q @%d", i.Key, o.Value, o.Revision)
		case i.Kind == opCAS:
			return fmt.Sprintf("cas(%s %q->%q) -> %v %q @%d", i.Key, i.Expect, i.Value, o.Succeeded, o.Value, o.Revision)
		case i.Kind == opDelete:
			return fmt.Sprintf("delete(%s) -> %v @%d", i.Key, o.Deleted, o.Revision)
		}
		return fmt.Sprintf("put(%s %s) @%d", i.Key, i.Value, o.Revision)
	},
}

// history is every client operation of a campaign, with its call and
// return times on one monotonic clock.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func newHistory() *history { return &history{start: time.Now()} }

// now is the time on the history's clock.
func (h *history) now() int64 { return int64(time.Since(h.start)) }

// add records an operation that was called at call and returned now. A
// get whose outcome is unknown changed nothing and says nothing: it is
// left out.
func (h *history) add(client int, in input, call int64, out output) {
	ret := h.now()
	if out.Unknown {
		if in.Kind == opGet {
			return
		}
		ret = math.MaxInt64
	}
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

func (h *history) operations() []porcupine.Operation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// checkLinearizable checks the history against the register model within
// timeout; Unknown (the checker ran out of time) is an error too.
func checkLinearizable(ops []porcupine.Operation, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(registerModel, ops, timeout)
}

// revisionWentBack finds two operations where the one that returned
// first saw a higher revision than one called after it returned: etcd's
// revision never goes backwards in real time. It returns a description,
// "" when none.
func revisionWentBack(ops []porcupine.Operation) string {
	var known []porcupine.Operation
	for _, op := range ops {
		if o := op.Output.(output); !o.Unknown && o.Revision > 0 {
			known = append(known, op)
		}
	}
	byReturn := slices.Clone(known)
	sort.Slice(byReturn, func(i, j int) bool { return byReturn[i].Return < byReturn[j].Return })
	sort.Slice(known, func(i, j int) bool { return known[i].Call < known[j].Call })
	var highest porcupine.Operation
	next := 0
	for _, op := range known {
		for next < len(byReturn) && byReturn[next].Return < op.Call {
			if r := byReturn[next].Output.(output).Revision; r > revisionOf(highest) {
				highest = byReturn[next]
			}
			next++
		}
		if revisionOf(op) < revisionOf(highest) {
			return fmt.Sprintf("%s returned at %s with revision %d, then %s called at %s saw revision %d",
				registerModel.DescribeOperation(highest.Input, highest.Output), time.Duration(highest.Return),
				revisionOf(highest), registerModel.DescribeOperation(op.Input, op.Output), time.Duration(op.Call), revisionOf(op))
		}
	}
	return ""
}

func revisionOf(op porcupine.Operation) int64 {
	if op.Output == nil {
		return 0
	}
	return op.Output.(output).Revision
}
