package tasks

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdlet/etcdlet/config"
)

// The agent starts its etcd member whether or not object storage answers
// (it runs before the kubelet, and the S3 server may be down or run on
// this very cluster): its snapshot store is set up without a call. The
// restore command, run by an operator, asks the bucket at once and says
// what is wrong.
func TestS3StoreIsOpenedWithoutACallUnlessChecked(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close() // nothing answers there now
	creds := t.TempDir()
	for _, name := range []string{"accessKeyID", "secretAccessKey"} {
		if err := os.WriteFile(filepath.Join(creds, name), []byte("secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`cluster: {name: etcd-main}
members: {source: static, addresses: [127.0.0.1]}
node: {address: 127.0.0.1}
backup:
  store:
    provider: s3
    s3: {bucket: snapshots, endpoint: %s, forcePathStyle: true, credentialsDir: %s}
`, endpoint, creds)))
	if err != nil {
		t.Fatal(err)
	}
	if store, err := OpenSnapshotStore(context.Background(), cfg.Backup.Store, false); err != nil || store == nil {
		t.Fatalf("the agent's store: %v, want it set up without asking the server", err)
	}
	if _, err := OpenSnapshotStore(context.Background(), cfg.Backup.Store, true); err == nil {
		t.Fatal("a checked store with no server answering: no error")
	}
}
