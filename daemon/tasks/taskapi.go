package tasks

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/task"
	"github.com/etcdlet/etcdlet/internal/atomicfile"
)

// TokenFile is the file in the state dir holding the bearer token that the
// agent listener's /tasks routes require: reading it needs the state dir
// (root only, 0700), so only root orders tasks, even on a loopback
// listener every local user reaches.
const TokenFile = "agent-token"

// ReadToken reads the agent's token from the state dir.
func ReadToken(stateDir string) (string, error) {
	tok, err := readSecretLine(filepath.Join(stateDir, TokenFile))
	if err != nil {
		return "", fmt.Errorf("read the agent's token (run as root; is the agent running?): %w", err)
	}
	return tok, nil
}

// readSecretLine reads a small file holding one secret (a token, a key):
// a regular file, not through a symbolic link, that only root can change
// and read (config.CheckSecret), trimmed, not empty.
func readSecretLine(path string) (string, error) {
	b, fi, err := config.ReadRegularNoFollow(path, 4096)
	if err != nil {
		return "", err
	}
	if err := config.CheckSecret(path, fi); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("%s %w", path, errEmptySecret)
	}
	return v, nil
}

var errEmptySecret = errors.New("is empty")

// ensureToken reads the token, creating it on the first start.
func ensureToken(stateDir string) (string, error) {
	tok, err := ReadToken(stateDir)
	if err == nil {
		return tok, nil
	}
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errEmptySecret) {
		return "", err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	tok = hex.EncodeToString(b[:])
	if err := atomicfile.Write(filepath.Join(stateDir, TokenFile), []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the agent's token: %w", err)
	}
	return tok, nil
}

// Routes serves the task API for `etcdlet task`: POST /tasks (a
// task.Request; 201 with the task, 409 with the rejected task, 400 for a
// bad request), GET /tasks, GET /tasks/{id}, POST /tasks/{id}/cancel.
func (o *Service) Routes(mux *http.ServeMux) {
	token := o.token
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
				http.Error(w, "the task API needs the agent's token (the file "+TokenFile+" in the state dir, readable by root)", http.StatusUnauthorized)
				return
			}
			h(w, r)
		}
	}
	mux.HandleFunc("POST /tasks", auth(func(w http.ResponseWriter, r *http.Request) {
		var req task.Request
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, "task request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if req.Source == "" {
			req.Source = "cli"
		}
		t, ok, err := o.runner.Submit(req)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
		case !ok:
			writeJSON(w, http.StatusConflict, t)
		default:
			writeJSON(w, http.StatusCreated, t)
		}
	}))
	mux.HandleFunc("GET /tasks", auth(func(w http.ResponseWriter, _ *http.Request) {
		tasks, err := o.runner.List()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeJSON(w, http.StatusOK, tasks)
	}))
	mux.HandleFunc("GET /tasks/{id}", auth(func(w http.ResponseWriter, r *http.Request) {
		t, err := o.runner.Get(r.PathValue("id"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		writeJSON(w, http.StatusOK, t)
	}))
	mux.HandleFunc("POST /tasks/{id}/cancel", auth(func(w http.ResponseWriter, r *http.Request) {
		t, err := o.runner.Cancel(r.PathValue("id"))
		switch {
		case errors.Is(err, task.ErrNotFound):
			http.Error(w, err.Error(), http.StatusNotFound)
		case err != nil:
			http.Error(w, err.Error(), http.StatusConflict)
		default:
			writeJSON(w, http.StatusAccepted, t)
		}
	}))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
