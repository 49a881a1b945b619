package tasks

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/task"
)

// TestClientSpeaksTheTaskAPI checks the client against a listener that
// answers as the API does: the token is sent, a rejection (409 with the
// task) is a RejectedError, another refusal names the status and body,
// and an agent that is not running is named as such.
func TestClientSpeaksTheTaskAPI(t *testing.T) {
	stateDir := t.TempDir()
	token, err := ensureToken(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "Bearer "+token:
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		case r.Method == http.MethodPost && r.URL.Path == "/tasks":
			writeJSON(w, http.StatusConflict, task.Task{ID: "t1", LastOperation: task.Operation{Description: "task t0 holds the cluster"}})
		case r.URL.Path == "/tasks/t1":
			writeJSON(w, http.StatusOK, task.Task{ID: "t1", Phase: task.Rejected})
		default:
			http.Error(w, "no such task", http.StatusNotFound)
		}
	}))
	defer srv.Close()
	agent := config.Agent{StateDir: stateDir, Listen: strings.TrimPrefix(srv.URL, "http://")}
	c, err := NewClient(agent)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	_, err = c.Submit(ctx, task.Request{Type: "snapshot"})
	if rejected, ok := errors.AsType[*RejectedError](err); !ok || rejected.Task.ID != "t1" || !strings.Contains(err.Error(), "task t1 rejected: task t0 holds the cluster") {
		t.Errorf("a rejected submission: %v", err)
	}
	if got, err := c.Task(ctx, "t1"); err != nil || got.Phase != task.Rejected {
		t.Errorf("Task = %+v, %v", got, err)
	}
	if _, err := c.Cancel(ctx, "t9"); err == nil || !strings.Contains(err.Error(), "404 Not Found: no such task") {
		t.Errorf("an unknown task: %v", err)
	}

	c.token = "forged"
	if _, err := c.List(ctx); err == nil || !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Errorf("a wrong token: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	agent.Listen = l.Addr().String()
	l.Close()
	down, err := NewClient(agent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := down.List(ctx); err == nil || !strings.Contains(err.Error(), "is it running?") {
		t.Errorf("no agent: %v", err)
	}
}
