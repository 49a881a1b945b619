package campaign

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// op builds an operation of client c over [call, ret] (ret < 0: unknown
// outcome, open to the end of time).
func op(c int, call, ret int64, in input, out output) porcupine.Operation {
	if ret < 0 {
		out.Unknown, ret = true, math.MaxInt64
	}
	return porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret}
}

func put(k, v string) input         { return input{Kind: opPut, Key: k, Value: v} }
func get(k string) input            { return input{Kind: opGet, Key: k} }
func del(k string) input            { return input{Kind: opDelete, Key: k} }
func cas(k, expect, v string) input { return input{Kind: opCAS, Key: k, Expect: expect, Value: v} }

// The register model accepts what a linearizable store can answer and
// refuses what it cannot, key by key.
func TestRegisterModel(t *testing.T) {
	for _, tt := range []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"a read after a write sees it", []porcupine.Operation{
			op(0, 0, 10, put("a", "1"), output{Revision: 2}),
			op(1, 20, 30, get("a"), output{Value: "1", Revision: 2}),
		}, true},
		{"a stale read after a write returned", []porcupine.Operation{
			op(0, 0, 10, put("a", "1"), output{Revision: 2}),
			op(1, 20, 30, get("a"), output{Value: "", Revision: 2}),
		}, false},
		{"a read concurrent with a write may see either", []porcupine.Operation{
			op(0, 0, 30, put("a", "1"), output{Revision: 2}),
			op(1, 10, 20, get("a"), output{Value: "", Revision: 1}),
		}, true},
		{"a write of unknown outcome may take effect later", []porcupine.Operation{
			op(0, 0, -1, put("a", "1"), output{}),
			op(1, 20, 30, get("a"), output{Value: "", Revision: 1}),
			op(1, 40, 50, get("a"), output{Value: "1", Revision: 2}),
		}, true},
		{"a value never written is never read", []porcupine.Operation{
			op(0, 0, -1, put("a", "1"), output{}),
			op(1, 40, 50, get("a"), output{Value: "2", Revision: 2}),
		}, false},
		{"a value read, then the older one again", []porcupine.Operation{
			op(0, 0, 5, put("a", "1"), output{Revision: 2}),
			op(0, 10, 15, put("a", "2"), output{Revision: 3}),
			op(1, 20, 25, get("a"), output{Value: "2", Revision: 3}),
			op(2, 30, 35, get("a"), output{Value: "1", Revision: 3}),
		}, false},
		{"compare-and-swap succeeds on the value it expects", []porcupine.Operation{
			op(0, 0, 5, put("a", "1"), output{Revision: 2}),
			op(1, 10, 15, cas("a", "1", "2"), output{Succeeded: true, Revision: 3}),
			op(1, 20, 25, get("a"), output{Value: "2", Revision: 3}),
		}, true},
		{"compare-and-swap that fails reports the value found", []porcupine.Operation{
			op(0, 0, 5, put("a", "1"), output{Revision: 2}),
			op(1, 10, 15, cas("a", "", "2"), output{Succeeded: false, Value: "1", Revision: 2}),
		}, true},
		{"compare-and-swap cannot succeed against another value", []porcupine.Operation{
			op(0, 0, 5, put("a", "1"), output{Revision: 2}),
			op(1, 10, 15, cas("a", "3", "2"), output{Succeeded: true, Revision: 3}),
		}, false},
		{"a delete of an absent key deletes nothing", []porcupine.Operation{
			op(0, 0, 5, del("a"), output{Deleted: true, Revision: 2}),
		}, false},
		{"keys are independent registers", []porcupine.Operation{
			op(0, 0, 5, put("a", "1"), output{Revision: 2}),
			op(1, 10, 15, get("b"), output{Value: "", Revision: 2}),
			op(1, 20, 25, del("a"), output{Deleted: true, Revision: 3}),
			op(2, 30, 35, get("a"), output{Value: "", Revision: 3}),
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			result, _ := checkLinearizable(tt.ops, 10*time.Second)
			if (result == porcupine.Ok) != tt.ok {
				t.Errorf("check: %s, want linearizable %v", result, tt.ok)
			}
		})
	}
}

// Revisions never go backwards in real time; concurrent operations may
// see them in any order.
func TestRevisionWentBack(t *testing.T) {
	ok := []porcupine.Operation{
		op(0, 0, 10, put("a", "1"), output{Revision: 5}),
		op(1, 5, 15, get("b"), output{Revision: 4}), // concurrent: fine
		op(1, 20, 30, get("a"), output{Value: "1", Revision: 5}),
		op(2, 25, -1, put("b", "2"), output{}), // unknown: no revision
	}
	if p := revisionWentBack(ok); p != "" {
		t.Errorf("a history whose revisions never go back: %s", p)
	}
	back := append(ok, op(2, 40, 50, get("b"), output{Revision: 3}))
	if p := revisionWentBack(back); !strings.Contains(p, "saw revision 3") {
		t.Errorf("a read at revision 3 after one returned 5: %q", p)
	}
}
