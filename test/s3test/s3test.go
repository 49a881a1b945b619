// Package s3test runs a real S3 server, versitygw with its posix backend,
// for tests that store snapshots in S3. The binary comes from
// hack/versitygw.sh through ETCDLET_VERSITYGW.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sys/unix"

	"github.com/etcdlet/etcdlet/daemon/snapshot"
)

// Server is a running versitygw with one bucket.
type Server struct {
	Endpoint  string // http://127.0.0.1:<port>
	Bucket    string
	AccessKey string
	SecretKey string
	process   *os.Process
}

// Pause stops the server's process (SIGSTOP): connections stay open and
// every request hangs, as with a server that stopped answering.
func (s Server) Pause(t testing.TB) {
	t.Helper()
	if err := s.process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("versitygw: pause: %v", err)
	}
}

// Resume continues a paused server.
func (s Server) Resume(t testing.TB) {
	t.Helper()
	if err := s.process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("versitygw: resume: %v", err)
	}
}

// S3Config is the store configuration for the server's bucket.
func (s Server) S3Config(prefix string) snapshot.S3Config {
	return snapshot.S3Config{
		Bucket: s.Bucket, Prefix: prefix, Endpoint: s.Endpoint, Region: "us-east-1",
		AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey, ForcePathStyle: true,
	}
}

// Client is an S3 client of the server, for what the store does not do
// (creating buckets, looking at objects behind its back).
func (s Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey}, nil
		}),
	})
}

const (
	envBinary  = "ETCDLET_VERSITYGW"
	readyLimit = 20 * time.Second
	// A port found free may be taken before versitygw binds it; a few
	// attempts make that race harmless.
	attempts = 3
)

// Option changes what Start starts.
type Option func(*options)

type options struct{ versioned bool }

// Versioned enables versioning on the bucket, as object lock requires.
func Versioned() Option { return func(o *options) { o.versioned = true } }

// Start runs versitygw on 127.0.0.1 and a free port with a fresh posix
// backend in a temporary directory, random credentials and a bucket, and
// stops it when the test ends. Without the binary the test fails, saying
// how to get it.
func Start(t testing.TB, opts ...Option) Server {
	t.Helper()
	bin := os.Getenv(envBinary)
	if bin == "" {
		t.Fatalf("%s is not set: the test needs versitygw, a real S3 server; run `export %s=$(hack/versitygw.sh)` (builds it once into the cache) or `make test`", envBinary, envBinary)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s=%s: %v; run `export %s=$(hack/versitygw.sh)`", envBinary, bin, err, envBinary)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	args := []string{"posix", root}
	if o.versioned {
		versions := filepath.Join(dir, "versions")
		if err := os.Mkdir(versions, 0o700); err != nil {
			t.Fatal(err)
		}
		args = []string{"posix", "--versioning-dir", versions, root}
	}
	// The posix backend keeps object metadata in xattrs; where the temporary
	// directory's filesystem has none (tmpfs without user xattrs), in a
	// sidecar directory.
	if err := unix.Setxattr(root, "user.etcdlet.probe", []byte("1"), 0); err != nil {
		side := filepath.Join(dir, "sidecar")
		if err := os.Mkdir(side, 0o700); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"posix", "--sidecar", side}, args[1:]...)
	} else {
		_ = unix.Removexattr(root, "user.etcdlet.probe")
	}
	s := Server{Bucket: "etcdlet-test", AccessKey: "etcdlet" + randomHex(t, 6), SecretKey: randomHex(t, 20)}
	var err error
	for range attempts {
		if s.Endpoint, s.process, err = start(t, bin, s, args); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("versitygw: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.Bucket}); err != nil {
		t.Fatalf("versitygw: create bucket %s: %v", s.Bucket, err)
	}
	if o.versioned {
		_, err := s.Client().PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
			Bucket: &s.Bucket, VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
		})
		if err != nil {
			t.Fatalf("versitygw: enable versioning on %s: %v", s.Bucket, err)
		}
	}
	return s
}

// start runs one versitygw process and waits until it answers its health
// endpoint; it returns the endpoint, or why it did not come up.
func start(t testing.TB, bin string, s Server, backend []string) (string, *os.Process, error) {
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	args := append([]string{"--access", s.AccessKey, "--secret", s.SecretKey, "--port", addr, "--quiet", "--health", "/health"}, backend...)
	cmd := exec.Command(bin, args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited := make(chan struct{})
	var waitErr error // Wait's error (the exit status); set before exited is closed
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	// signal sends sig; os.ErrProcessDone means the server exited already,
	// which exited shows.
	signal := func(sig os.Signal) {
		if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("versitygw: send %v: %v", sig, err)
		}
	}
	// stop ends the server. The exit status it then has, by a signal,
	// says nothing.
	stop := func() {
		signal(syscall.SIGCONT) // a paused server ignores SIGTERM
		signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			signal(os.Kill)
			<-exited
		}
	}
	endpoint := "http://" + addr
	deadline := time.Now().Add(readyLimit)
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-exited:
			if waitErr != nil {
				return "", nil, fmt.Errorf("exited before it was ready (%v): %s", waitErr, out)
			}
			return "", nil, fmt.Errorf("exited before it was ready: %s", out)
		default:
		}
		if resp, err := hc.Get(endpoint + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Cleanup(stop)
				return endpoint, cmd.Process, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("not ready on %s within %s: %s", addr, readyLimit, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// syncBuffer collects the server's output for error messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
