package etcdclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"go.etcd.io/etcd/api/v3/version"
)

// Versions asks a member for its versions on its client URL's /version,
// with the pool's TLS: the cluster version is there and in no gRPC answer
// (Status carries the server and storage versions only).
func (p *Pool) Versions(ctx context.Context, endpoint string) (version.Versions, error) {
	var v version.Versions
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/version", nil)
	if err != nil {
		return v, err
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: p.tls, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return v, err
	}
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("%s/version: %s", endpoint, resp.Status)
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("%s/version: %w", endpoint, err)
	}
	return v, nil
}
