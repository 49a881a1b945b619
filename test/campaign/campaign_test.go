package campaign

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

var (
	duration  = flag.Duration("campaign.duration", 2*time.Minute, "how long faults are injected (make campaign: CAMPAIGN_DURATION)")
	seed      = flag.Uint64("campaign.seed", 0, "the schedule's seed; 0 draws one (make campaign: CAMPAIGN_SEED)")
	minFaults = flag.Int("campaign.faults", 50, "inject at least this many faults, however long it takes")
	only      = flag.String("campaign.only", "", "inject only these kinds of fault, comma-separated (make campaign: CAMPAIGN_ONLY)")
	source    = flag.String("campaign.source", "", "where the agents read the list: file or etcd-resource; empty: drawn from the seed (make campaign: CAMPAIGN_SOURCE)")
)

// TestCampaign runs one campaign: make test a short one, make campaign
// one of CAMPAIGN_DURATION. A violation fails it, with the seed and the
// command that replays the same schedule.
func TestCampaign(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the campaign creates network namespaces and nftables rules and needs root: run `sudo make test`")
	}
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	src := *source
	switch src {
	case "":
		// Every other seed reads the Etcd: both sources, over many runs.
		src = SourceFile
		if s%2 == 0 {
			src = SourceResource
		}
	case SourceFile, SourceResource:
	default:
		t.Fatalf("-campaign.source %q: want %s or %s", src, SourceFile, SourceResource)
	}
	opts := Options{Seed: s, Duration: *duration, MinFaults: *minFaults, Source: src,
		Replay: fmt.Sprintf("make campaign CAMPAIGN_SEED=%d CAMPAIGN_DURATION=%s CAMPAIGN_SOURCE=%s", s, *duration, src)}
	if *only != "" {
		opts.Only = strings.Split(*only, ",")
		for _, k := range opts.Only {
			if !slices.Contains(FaultKinds(), k) {
				t.Fatalf("-campaign.only %q: %q is not a kind of fault; the kinds are %s", *only, k, strings.Join(FaultKinds(), ", "))
			}
			if k == "apiserver" && src != SourceResource {
				t.Fatalf("-campaign.only %q: apiserver restarts the API server that serves the Etcd: it needs -campaign.source %s", *only, SourceResource)
			}
		}
		opts.Replay += " CAMPAIGN_ONLY=" + *only
	}
	bin, err := harness.BuildBinary(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts.Binary = bin
	r := Run(t, opts)
	t.Log(r.summary(opts))
}
