package snapshot

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	etcdutl "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdlet/etcdlet/daemon/logging"
	"github.com/etcdlet/etcdlet/daemon/runtime/embedded"
	"github.com/etcdlet/etcdlet/internal/atomicfile"
)

// RestoreOptions say what to restore where.
type RestoreOptions struct {
	Store  Store
	Full   Snapshot
	Deltas []Snapshot // in order, each starting where the one before ends (see Chain)
	// DataDir is the etcd data directory to create; it must not exist.
	DataDir string
	// Name, PeerURL and InitialClusterToken make the restored member, the
	// single member of a new cluster, as etcdutl snapshot restore does.
	Name                string
	PeerURL             string
	InitialClusterToken string // "" is etcd's default, etcd-cluster
	TempDir             string // for the decompressed database; "" is os.TempDir()
	// DropPrefixes are deleted once the deltas are applied: state that
	// belonged to the old cluster's agents (their locks, whose leases a
	// replay cannot keep), not to the data.
	DropPrefixes []string
	// RevisionBump is added to the restored revision, which is then
	// marked compacted (etcdutl's --bump-revision and --mark-compacted):
	// a client that watched the lost cluster (a Kubernetes informer, the
	// API server's watch cache) resumes its watch with a compaction
	// error and lists again, instead of seeing revisions go backwards or
	// missing the writes between the snapshot and the loss. 0: no bump.
	RevisionBump int64
	Log          *slog.Logger
}

// restoreQuota is the backend quota of the etcd that replays the deltas:
// etcd's largest supported database (BR's default embedded quota), so a
// replay never stops on the 2 GiB default.
const restoreQuota = 8 << 30

// Restore builds DataDir from the full snapshot and the deltas: etcdutl
// restores the full as a one-member cluster, then an etcd started on it
// (127.0.0.1, ephemeral ports) replays the deltas' events as BR's restorer
// does (puts without their leases, one transaction per revision), and the
// revision reached is checked against the last snapshot's. It returns the
// restored revision, the bump included.
//
// The bump comes last: the replay needs the source's revisions. Without
// deltas etcdutl bumps the full snapshot as it restores it; with deltas
// the replayed database is saved as a snapshot and restored again with
// the bump. Either way an etcd started on the result must report the
// bumped revision.
//
// It works in DataDir+".partial" and renames that to DataDir at the end,
// so an interruption never leaves a half-restored directory under the name
// etcd starts from; the next attempt removes the leftover.
func Restore(ctx context.Context, o RestoreOptions) (int64, error) {
	rev, err := restore(ctx, o)
	if err != nil {
		return 0, fmt.Errorf("restore %s into %s: %w", o.Full.name(), o.DataDir, err)
	}
	return rev, nil
}

func restore(ctx context.Context, o RestoreOptions) (int64, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Store == nil || o.DataDir == "" || o.Name == "" || o.PeerURL == "":
		return 0, errors.New("the store, data dir, name and peer URL are needed")
	case o.Full.Kind != KindFull:
		return 0, fmt.Errorf("%s is not a full snapshot", o.Full.name())
	}
	if err := checkChain(o.Full, o.Deltas); err != nil {
		return 0, err
	}
	// Clean: "data/" would make the work directory "data/.partial".
	o.DataDir = filepath.Clean(o.DataDir)
	switch _, err := os.Lstat(o.DataDir); {
	case err == nil:
		return 0, errors.New("the data dir exists, and must not: a restore makes a fresh one")
	case !errors.Is(err, fs.ErrNotExist):
		return 0, err
	}
	partial := o.DataDir + ".partial"
	if _, err := os.Lstat(partial); err == nil {
		log.Warn("removing the leftover of an interrupted restore", "dir", partial)
	}
	if err := os.RemoveAll(partial); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(o.DataDir), 0o700); err != nil {
		return 0, err
	}
	rev, err := build(ctx, o, partial, log)
	if err != nil {
		os.RemoveAll(partial)
		return 0, err
	}
	if err := os.Rename(partial, o.DataDir); err != nil {
		return 0, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(o.DataDir)); err != nil {
		return 0, err
	}
	log.Info("restored etcd data dir", "dir", o.DataDir, "full", o.Full.SnapName, "deltas", len(o.Deltas), "revision", rev, "bump", o.RevisionBump)
	return rev, nil
}

// build restores into dir (see Restore) and returns the revision reached.
func build(ctx context.Context, o RestoreOptions, dir string, log *slog.Logger) (int64, error) {
	db, err := decompressFull(ctx, o)
	if err != nil {
		return 0, err
	}
	defer os.Remove(db)
	bumpFirst := len(o.Deltas) == 0
	if err := etcdutlRestore(o, db, dir, map[bool]int64{true: o.RevisionBump}[bumpFirst], log); err != nil {
		return 0, err
	}
	var resave string
	if !bumpFirst && o.RevisionBump > 0 {
		resave = db + ".replayed"
		defer os.Remove(resave)
	}
	rev, err := replay(ctx, o, dir, resave, log)
	if err != nil || resave == "" {
		return rev, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return 0, err
	}
	if err := etcdutlRestore(o, resave, dir, o.RevisionBump, log); err != nil {
		return 0, err
	}
	return verify(ctx, dir, o.Name, rev+o.RevisionBump, log)
}

// decompressFull decompresses the full snapshot to a temporary file
// beside the data dir (TempDir), whose path it returns.
func decompressFull(ctx context.Context, o RestoreOptions) (string, error) {
	f, err := os.CreateTemp(o.TempDir, "etcdlet-restore-*.db")
	if err != nil {
		return "", err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = ReadFull(ctx, o.Store, o.Full, w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// etcdutlRestore has etcdutl restore the database db into dir, as
// `etcdutl snapshot restore` would, bumping the revision by bump and
// marking it compacted when bump is not 0.
func etcdutlRestore(o RestoreOptions, db, dir string, bump int64, log *slog.Logger) error {
	if bump < 0 {
		return fmt.Errorf("revision bump %d: must not be negative", bump)
	}
	token := o.InitialClusterToken
	if token == "" {
		token = "etcd-cluster" // what etcd and etcdutl default to
	}
	cfg := etcdutl.RestoreConfig{
		SnapshotPath: db, Name: o.Name, OutputDataDir: dir, PeerURLs: []string{o.PeerURL},
		InitialCluster: o.Name + "=" + o.PeerURL, InitialClusterToken: token,
		RevisionBump: uint64(bump), MarkCompacted: bump > 0,
	}
	if err := etcdutl.NewV3(logging.ZapLogger(log, "warn")).Restore(cfg); err != nil {
		return fmt.Errorf("etcdutl restore: %w", err)
	}
	return nil
}

// replay starts etcd on dir, applies the deltas, drops DropPrefixes and
// returns the revision reached; with saveTo, it then saves the database
// there as a snapshot. The etcd runs even without deltas: starting proves
// the restored directory is one etcd can start from.
func replay(ctx context.Context, o RestoreOptions, dir, saveTo string, log *slog.Logger) (int64, error) {
	e, err := startLocal(ctx, dir, o.Name, false, log)
	if err != nil {
		return 0, err
	}
	defer embedded.CloseServer(e)
	cli, err := localClient(e, log)
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	rev, err := currentRevision(ctx, cli)
	if err != nil {
		return 0, err
	}
	if rev < o.Full.LastRevision {
		return 0, fmt.Errorf("the restored database is at revision %d, before the snapshot's %d", rev, o.Full.LastRevision)
	}
	for _, d := range o.Deltas {
		events, err := ReadDelta(ctx, o.Store, d)
		if err != nil {
			return 0, err
		}
		if rev, err = apply(ctx, cli, rev, events); err != nil {
			return 0, fmt.Errorf("apply %s: %w", d.SnapName, err)
		}
		// Past its end, when the full snapshot held revisions past its
		// name's and they cover this delta; short of it, events are missing.
		if rev < d.LastRevision {
			return 0, fmt.Errorf("apply %s: reached revision %d, the snapshot ends at %d", d.SnapName, rev, d.LastRevision)
		}
		log.Info("applied delta snapshot", "snapshot", d.SnapName, "events", len(events), "revision", rev)
	}
	for _, p := range o.DropPrefixes {
		resp, err := cli.Delete(ctx, p, clientv3.WithPrefix())
		if err != nil {
			return 0, fmt.Errorf("delete the old cluster's %s keys: %w", p, err)
		}
		if resp.Deleted > 0 {
			rev = resp.Header.Revision
			log.Info("deleted the old cluster's coordination keys", "prefix", p, "keys", resp.Deleted)
		}
	}
	if saveTo != "" {
		if err := SaveDB(ctx, cli, saveTo); err != nil {
			return 0, fmt.Errorf("save the replayed database for the revision bump: %w", err)
		}
	}
	return rev, nil
}

// verify starts etcd on dir and checks that it reports revision want and
// has it marked compacted, which is what a bumped restore must give.
func verify(ctx context.Context, dir, name string, want int64, log *slog.Logger) (int64, error) {
	e, err := startLocal(ctx, dir, name, false, log)
	if err != nil {
		return 0, err
	}
	defer embedded.CloseServer(e)
	got := e.Server.KV().Rev()
	if got != want {
		return 0, fmt.Errorf("after the revision bump etcd reports revision %d, want %d", got, want)
	}
	if c := e.Server.KV().FirstRev(); c != want {
		return 0, fmt.Errorf("after the revision bump etcd has revision %d compacted, want %d", c, want)
	}
	return got, nil
}

// apply replays the events after revision rev, one transaction per
// revision so that the revisions stay those of the source, and returns
// the revision reached. Events at or below rev are in the database already.
func apply(ctx context.Context, cli *clientv3.Client, rev int64, events []*mvccpb.Event) (int64, error) {
	var ops []clientv3.Op
	for i, ev := range events {
		r := ev.Kv.ModRevision
		if r <= rev {
			continue
		}
		if r != rev+1 {
			return rev, fmt.Errorf("the database is at revision %d but the next event is at %d", rev, r)
		}
		switch ev.Type {
		case mvccpb.Event_PUT:
			// Without the lease, as BR replays: a lease granted after the
			// full snapshot is not in the database.
			ops = append(ops, clientv3.OpPut(string(ev.Kv.Key), string(ev.Kv.Value)))
		case mvccpb.Event_DELETE:
			ops = append(ops, clientv3.OpDelete(string(ev.Kv.Key)))
		}
		if i+1 < len(events) && events[i+1].Kv.ModRevision == r {
			continue
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return rev, fmt.Errorf("revision %d: %w", r, err)
		}
		if resp.Header.Revision != r {
			return rev, fmt.Errorf("revision %d was applied as %d", r, resp.Header.Revision)
		}
		rev, ops = r, nil
	}
	return rev, nil
}

// startLocal starts etcd on a restored data dir, reachable only on
// 127.0.0.1, on ports the kernel picks, so that nothing else can join or
// write while the deltas are replayed. The member keeps the peer URL the
// restore gave it; the client URL it publishes here is replaced by the
// member's own when etcd next starts on the directory. With forceNew, the
// data dir is a member's of a cluster that lost its quorum, and etcd
// makes it the only member of its cluster (force-new-cluster).
func startLocal(ctx context.Context, dir, name string, forceNew bool, log *slog.Logger) (*embed.Etcd, error) {
	local := []url.URL{{Scheme: "http", Host: "127.0.0.1:0"}}
	cfg := embed.NewConfig()
	cfg.Name = name
	cfg.Dir = dir
	cfg.ForceNewCluster = forceNew
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = local, local
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = local, local
	cfg.QuotaBackendBytes = restoreQuota
	// The source cluster's limits are unknown; a transaction it accepted
	// must replay here.
	cfg.MaxTxnOps = 1 << 20
	cfg.MaxRequestBytes = 64 << 20
	// Errors only: this etcd is a tool of the restore, and its warnings
	// are about settings chosen on purpose (the request limit above, the
	// simple auth token of a server nobody else reaches, its listeners
	// closing at the end), which the operator must not read as problems.
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logging.ZapLogger(log.With("component", "etcd-restore"), "error"))
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd on the restored data: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		embedded.CloseServer(e)
		return nil, fmt.Errorf("etcd on the restored data: %w", err)
	case <-time.After(time.Minute):
		embedded.CloseServer(e)
		return nil, errors.New("etcd on the restored data was not ready within a minute")
	case <-ctx.Done():
		embedded.CloseServer(e)
		return nil, ctx.Err()
	}
}

// localClient is a client of an etcd startLocal started.
func localClient(e *embed.Etcd, log *slog.Logger) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints: []string{"http://" + e.Clients[0].Addr().String()}, DialTimeout: 10 * time.Second,
		MaxCallSendMsgSize: 2 * int(e.Config().MaxRequestBytes), Logger: logging.ZapLogger(log, "warn"),
	})
}

// checkChain checks that each delta starts where the one before ends.
func checkChain(full Snapshot, deltas []Snapshot) error {
	prev := full
	for _, d := range deltas {
		switch {
		case d.Kind != KindDelta:
			return fmt.Errorf("%s is not a delta snapshot", d.name())
		case d.StartRevision > prev.LastRevision+1:
			return fmt.Errorf("gap: %s ends at revision %d but the next, %s, starts at %d: revisions %d-%d are missing",
				prev.name(), prev.LastRevision, d.name(), d.StartRevision, prev.LastRevision+1, d.StartRevision-1)
		case d.StartRevision <= prev.LastRevision:
			return fmt.Errorf("overlap: %s ends at revision %d but the next, %s, starts at %d",
				prev.name(), prev.LastRevision, d.name(), d.StartRevision)
		}
		prev = d
	}
	return nil
}
