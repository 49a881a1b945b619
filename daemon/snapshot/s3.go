package snapshot

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3Config says where an S3Store keeps its snapshots: in Bucket under
// Prefix (BR's --store-prefix), on AWS or the S3-compatible Endpoint.
type S3Config struct {
	Bucket          string
	Prefix          string
	Endpoint        string // e.g. https://s3.example.com; empty for AWS
	Region          string // empty is us-east-1, which S3-compatible servers accept
	AccessKeyID     string
	SecretAccessKey string
	ForcePathStyle  bool // http://endpoint/bucket/key instead of http://bucket.endpoint/key
	// CAFile is a PEM bundle trusted for an https Endpoint instead of the
	// system's roots.
	CAFile string
}

// S3Store keeps snapshots in an S3 bucket.
type S3Store struct {
	client   *s3.Client
	bucket   string
	prefix   string
	endpoint string
}

// Multipart uploads stream the object in parts of partSize, up to
// partsInFlight at a time, so memory stays at partSize*partsInFlight
// whatever the size. 8 MiB parts reach S3's 10,000-part limit at 78 GiB,
// far beyond etcd's largest database (8 GiB).
const (
	partSize      = 8 << 20
	partsInFlight = 4
	maxParts      = 10000
)

// NewS3Store connects to the bucket and checks, with HeadBucket, that it
// exists and the credentials open it, so a wrong setting fails now rather
// than at the first snapshot.
func NewS3Store(ctx context.Context, c S3Config) (*S3Store, error) {
	st, err := OpenS3Store(c)
	if err != nil {
		return nil, err
	}
	if _, err := st.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &st.bucket}); err != nil {
		return nil, fmt.Errorf("s3 snapshot store %s: head bucket: %w", st, err)
	}
	return st, nil
}

// OpenS3Store sets the store up without a call to the server: for the
// agent, whose start (and its etcd member's) must not wait for object
// storage; a wrong setting shows at the first snapshot.
func OpenS3Store(c S3Config) (*S3Store, error) {
	st, err := newS3Store(c)
	if err != nil {
		return nil, fmt.Errorf("s3 snapshot store s3://%s/%s: %w", c.Bucket, c.Prefix, err)
	}
	return st, nil
}

func newS3Store(c S3Config) (*S3Store, error) {
	if c.Bucket == "" {
		return nil, errors.New("no bucket given")
	}
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return nil, errors.New("the access key ID and the secret access key are both needed")
	}
	prefix, err := cleanPrefix(c.Prefix)
	if err != nil {
		return nil, err
	}
	region := c.Region
	if region == "" {
		region = "us-east-1"
	}
	hc := awshttp.NewBuildableClient()
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", c.CAFile)
		}
		hc = hc.WithTransportOptions(func(t *http.Transport) {
			t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		})
	}
	creds := aws.Credentials{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey, Source: "etcdlet"}
	opts := s3.Options{
		Region:       region,
		Credentials:  aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
		UsePathStyle: c.ForcePathStyle,
		HTTPClient:   hc,
		// The SDK's default since 2025 adds CRC32 checksums in aws-chunked
		// trailers to every upload, which many S3-compatible servers
		// reject; S3 itself does not need them.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if c.Endpoint != "" {
		opts.BaseEndpoint = aws.String(c.Endpoint)
	}
	return &S3Store{client: s3.New(opts), bucket: c.Bucket, prefix: prefix, endpoint: c.Endpoint}, nil
}

func (st *S3Store) String() string {
	s := "s3://" + path.Join(st.bucket, st.prefix)
	if st.endpoint != "" {
		s += " (" + st.endpoint + ")"
	}
	return s
}

// Put uploads in one request what fits in a part, and anything larger as a
// multipart upload streamed from r; S3 shows an object only once complete.
func (st *S3Store) Put(ctx context.Context, s Snapshot, r io.Reader) error {
	key, err := objectKey(st.prefix, s)
	if err != nil {
		return fmt.Errorf("upload %s: %w", s.name(), err)
	}
	// Read as it comes rather than into a whole part: most deltas are small.
	first, err := io.ReadAll(io.LimitReader(ctxReader{ctx, r}, partSize))
	switch {
	case err != nil:
	case len(first) < partSize:
		_, err = st.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &st.bucket, Key: &key, Body: bytes.NewReader(first)})
	default:
		err = st.putMultipart(ctx, key, first, r)
	}
	if err != nil {
		return fmt.Errorf("upload %s to %s: %w", s.name(), st, err)
	}
	return nil
}

func (st *S3Store) putMultipart(ctx context.Context, key string, first []byte, r io.Reader) error {
	up, err := st.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &st.bucket, Key: &key})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		parts []types.CompletedPart
	)
	// free holds the buffers not being uploaded; taking one before each
	// read bounds the parts in flight.
	free := make(chan []byte, partsInFlight)
	for range partsInFlight - 1 {
		free <- nil
	}
	buf, n := first, len(first)
	for num := int32(1); ; num++ {
		if num > maxParts {
			cancel(fmt.Errorf("the object needs more than %d parts of %d bytes", maxParts, partSize))
			break
		}
		data := buf[:n]
		wg.Go(func() {
			defer func() { free <- data[:partSize] }() // every buffer holds a part
			out, err := st.client.UploadPart(ctx, &s3.UploadPartInput{
				Bucket: &st.bucket, Key: &key, UploadId: up.UploadId, PartNumber: aws.Int32(num), Body: bytes.NewReader(data),
			})
			if err != nil {
				cancel(fmt.Errorf("part %d: %w", num, err))
				return
			}
			mu.Lock()
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
			mu.Unlock()
		})
		if n < partSize {
			break // that was the last part
		}
		select {
		case buf = <-free:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		if buf == nil {
			buf = make([]byte, partSize)
		}
		var err error
		n, err = io.ReadFull(ctxReader{ctx, r}, buf)
		if err == io.EOF {
			break
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			cancel(err)
			break
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		st.abort(ctx, key, up.UploadId)
		return err
	}
	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
	_, err = st.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &st.bucket, Key: &key, UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		st.abort(ctx, key, up.UploadId)
	}
	return err
}

// abort frees the parts of a failed upload, which S3 otherwise keeps (and
// bills) until a lifecycle rule removes them. It runs after the caller's
// context may have ended, hence its own deadline.
func (st *S3Store) abort(ctx context.Context, key string, uploadID *string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, _ = st.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &st.bucket, Key: &key, UploadId: uploadID})
}

func (st *S3Store) Get(ctx context.Context, s Snapshot) (io.ReadCloser, error) {
	key, err := objectKey(st.prefix, s)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", s.name(), err)
	}
	out, err := st.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &st.bucket, Key: &key, VersionId: s.VersionID})
	if _, ok := errors.AsType[*types.NoSuchKey](err); ok {
		return nil, fmt.Errorf("download %s from %s: %w", s.name(), st, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("download %s from %s: %w", s.name(), st, err)
	}
	return out.Body, nil
}

// List does what BR's S3 store does: on a bucket with versioning enabled
// (object lock needs it) it lists the versions and keeps each key's oldest,
// with its version ID; otherwise it lists the objects.
func (st *S3Store) List(ctx context.Context) ([]Snapshot, error) {
	prefix := path.Join(st.prefix, "v2") + "/"
	v, err := st.client.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: &st.bucket})
	if err != nil {
		return nil, fmt.Errorf("list %s: get bucket versioning: %w", st, err)
	}
	var keys []string
	var versions []*string
	if v.Status == types.BucketVersioningStatusEnabled {
		oldest := map[string]types.ObjectVersion{}
		p := s3.NewListObjectVersionsPaginator(st.client, &s3.ListObjectVersionsInput{Bucket: &st.bucket, Prefix: &prefix})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("list %s: list object versions: %w", st, err)
			}
			// S3 lists a key's versions newest first, so on a tie in
			// LastModified (it has seconds) the later listed is older.
			for _, o := range page.Versions {
				if prev, ok := oldest[*o.Key]; !ok || !o.LastModified.After(*prev.LastModified) {
					oldest[*o.Key] = o
				}
			}
		}
		for key, o := range oldest {
			keys = append(keys, key)
			versions = append(versions, o.VersionId)
		}
	} else {
		p := s3.NewListObjectsV2Paginator(st.client, &s3.ListObjectsV2Input{Bucket: &st.bucket, Prefix: &prefix})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("list %s: list objects: %w", st, err)
			}
			for _, o := range page.Contents {
				keys = append(keys, *o.Key)
			}
		}
	}
	return parseKeys(keys, versions), nil
}

// Delete removes the object, or the listed version of it in a versioned
// bucket (BR does the same; a plain delete would only add a marker).
func (st *S3Store) Delete(ctx context.Context, s Snapshot) error {
	key, err := objectKey(st.prefix, s)
	if err != nil {
		return fmt.Errorf("delete %s: %w", s.name(), err)
	}
	if _, err := st.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &st.bucket, Key: &key, VersionId: s.VersionID}); err != nil {
		return fmt.Errorf("delete %s from %s: %w", s.name(), st, err)
	}
	return nil
}
