package consent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
)

// PathRetire takes a POST of a RetireRequest: the node that recovers a
// cluster from its own data (etcdlet recover) asks every other node that
// holds data of it to promise, for good, not to start its member of that
// cluster again, and to join the recovered cluster once it answers.
const PathRetire = "/etcdlet/v1/retire"

// RetireRequest asks a node to retire its member of Cluster (hex ID) in
// favour of the cluster By recovers from its data. Gone are the nodes the
// operator named gone for good: a promise made to one of them gives way
// to this one.
type RetireRequest struct {
	Cluster string   `json:"cluster"`
	By      string   `json:"by"`
	Gone    []string `json:"gone,omitempty"`
}

// RetireAnswer is a node's answer: Retired when it holds the promise to
// By (recorded before it answered), else Detail says why not.
type RetireAnswer struct {
	Node    string `json:"node"`
	Retired bool   `json:"retired"`
	Detail  string `json:"detail,omitempty"`
}

func retireHandler(retire func(caller netip.Addr, req RetireRequest) RetireAnswer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req RetireRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, maxAnswer)).Decode(&req); err != nil {
			http.Error(w, `want a JSON body {"cluster": "<hex ID>", "by": "<address>"}: `+err.Error(), http.StatusBadRequest)
			return
		}
		// The guard admitted the caller as a listed node; it asks for
		// itself only.
		caller, _ := netip.ParseAddrPort(r.RemoteAddr)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(retire(caller.Addr().Unmap().WithZone(""), req))
	}
}

// Retire asks one node to promise not to start its member of
// req.Cluster again (RetireRequest).
func (c *Client) Retire(ctx context.Context, node netip.Addr, req RetireRequest) (RetireAnswer, error) {
	httpReq, err := c.post(ctx, node, PathRetire, req)
	if err != nil {
		return RetireAnswer{}, err
	}
	return decodeAnswer[RetireAnswer](c, httpReq, "answer")
}
