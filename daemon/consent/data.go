package consent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
)

// PathData answers GET with this node's DataReport: what its member's
// data holds, for choosing the survivor a cluster that lost its quorum
// for good is recovered from.
const PathData = "/etcdlet/v1/data"

// DataReport is what one node's member data holds (datadir.Survey), read
// from the data dir while the member is stopped, or asked of the member
// while it runs (then LastIndex is its commit index: a lower bound).
type DataReport struct {
	Node string `json:"node"`
	// Running: the member runs; its figures come from its Status.
	Running bool `json:"running"`
	// MemberID and ClusterID in hex, as etcd prints them.
	MemberID  string `json:"memberID,omitempty"`
	ClusterID string `json:"clusterID,omitempty"`
	LastTerm  uint64 `json:"lastTerm"`
	LastIndex uint64 `json:"lastIndex"`
	Commit    uint64 `json:"commit"`
	Revision  int64  `json:"revision"`
	// RevisionUnknown: the member runs and did not say its revision (a
	// member restarted without quorum serves no client); Note says why.
	RevisionUnknown bool   `json:"revisionUnknown,omitempty"`
	Note            string `json:"note,omitempty"`
	// Error says why the data could not be read (none: no data).
	Error string `json:"error,omitempty"`
	// RetiredFor is the node this one promised not to start its member
	// again for: that node recovers the cluster from its data.
	RetiredFor string `json:"retiredFor,omitempty"`
}

// HasData reports whether the node holds member data that was read.
func (d DataReport) HasData() bool { return d.Error == "" && d.MemberID != "" }

// Ahead reports whether d's log goes further than o's, as raft compares
// logs when it elects a leader: the later last term, then the longer log;
// the higher revision breaks a tie (a known one before an unknown). A
// node without data is behind any with data.
func (d DataReport) Ahead(o DataReport) bool {
	switch {
	case d.HasData() != o.HasData():
		return d.HasData()
	case !d.HasData():
		return false // figures that were not read rank nothing
	case d.LastTerm != o.LastTerm:
		return d.LastTerm > o.LastTerm
	case d.LastIndex != o.LastIndex:
		return d.LastIndex > o.LastIndex
	case d.RevisionUnknown != o.RevisionUnknown:
		return o.RevisionUnknown // of two logs alike, the one whose revision is known
	}
	return d.Revision > o.Revision
}

// RankData sorts reports the most advanced first (Ahead), keeping the
// order of those that rank alike.
func RankData(reports []DataReport) {
	slices.SortStableFunc(reports, func(a, b DataReport) int {
		switch {
		case a.Ahead(b):
			return -1
		case b.Ahead(a):
			return 1
		}
		return 0
	})
}

func dataHandler(data func(context.Context) DataReport) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(data(r.Context()))
	}
}

// Data asks one node what its member data holds.
func (c *Client) Data(ctx context.Context, node netip.Addr) (DataReport, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(node, PathData), nil)
	if err != nil {
		return DataReport{}, err
	}
	return decodeAnswer[DataReport](c, req, "data report")
}
