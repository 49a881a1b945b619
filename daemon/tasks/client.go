package tasks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/task"
)

// Client calls an agent's task API (see API) on its listener, with the
// token from the agent's state dir.
type Client struct {
	http  *http.Client
	base  string
	token string
}

// NewClient is a client of the agent that agent configures.
func NewClient(agent config.Agent) (*Client, error) {
	token, err := ReadToken(agent.StateDir)
	if err != nil {
		return nil, err
	}
	c := &Client{http: &http.Client{Timeout: 30 * time.Second}, base: "http://" + agent.Listen, token: token}
	if f := agent.ListenTLS; f.Enabled() {
		// The listener requires a client certificate signed by its CA:
		// the listener's own certificate serves (it needs the clientAuth
		// usage), or agent.etcdClientTLS's when that is signed by the
		// same CA.
		tlsConfig, err := transport.TLSInfo{CertFile: f.CertFile, KeyFile: f.KeyFile, TrustedCAFile: f.CAFile}.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("agent.listenTLS: %w", err)
		}
		c.http.Transport = &http.Transport{TLSClientConfig: tlsConfig}
		c.base = "https://" + agent.Listen
	}
	return c, nil
}

// RejectedError is a task the agent rejected at submission (another
// task holds the cluster, or its Admit refused).
type RejectedError struct{ Task task.Task }

func (e *RejectedError) Error() string {
	return fmt.Sprintf("task %s rejected: %s", e.Task.ID, e.Task.LastOperation.Description)
}

// Submit submits a task.
func (c *Client) Submit(ctx context.Context, req task.Request) (task.Task, error) {
	var t task.Task
	return t, c.do(ctx, http.MethodPost, "/tasks", req, &t)
}

// List returns the agent's recent tasks.
func (c *Client) List(ctx context.Context) ([]task.Task, error) {
	var ts []task.Task
	return ts, c.do(ctx, http.MethodGet, "/tasks", nil, &ts)
}

// Task returns one task.
func (c *Client) Task(ctx context.Context, id string) (task.Task, error) {
	var t task.Task
	return t, c.do(ctx, http.MethodGet, "/tasks/"+id, nil, &t)
}

// TaskJSON returns one task as the agent wrote it.
func (c *Client) TaskJSON(ctx context.Context, id string) (json.RawMessage, error) {
	var t json.RawMessage
	return t, c.do(ctx, http.MethodGet, "/tasks/"+id, nil, &t)
}

// Cancel asks the agent to cancel a task.
func (c *Client) Cancel(ctx context.Context, id string) (task.Task, error) {
	var t task.Task
	return t, c.do(ctx, http.MethodPost, "/tasks/"+id+"/cancel", nil, &t)
}

func (c *Client) do(ctx context.Context, method, path string, body, into any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("reach the agent at %s (is it running?): %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated, http.StatusAccepted:
		return json.Unmarshal(data, into)
	case http.StatusConflict:
		var t task.Task
		if json.Unmarshal(data, &t) == nil && t.ID != "" {
			return &RejectedError{Task: t}
		}
	}
	return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
}
