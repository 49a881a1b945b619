package tasks

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/config/trust/trusttest"
)

// The task API token and the S3 credentials are read only when only root
// can change and read them: whoever reads the token orders tasks (a
// snapshot, a member restart), whoever reads the credentials reads every
// snapshot.
func TestSecretsAreReadOnlyWhenPrivate(t *testing.T) {
	trusttest.RequireRoot(t)
	tests := []struct {
		name     string
		mode     fs.FileMode
		uid, gid int
		wantErr  string // "": read
	}{
		{"0600, as the agent writes it", 0o600, 0, 0, ""},
		{"readable by root's group", 0o640, 0, 0, ""},
		{"readable by another group", 0o640, 0, trusttest.Nobody, "is readable by group 65534 (mode 0640)"},
		{"readable by others", 0o604, 0, 0, "is readable by others (mode 0604)"},
		{"owned by another user", 0o600, trusttest.Nobody, 0, "must be a file only root can change"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stateDir := trusttest.Dir(t, filepath.Join(t.TempDir(), "state"), 0o700)
			path := trusttest.File(t, filepath.Join(stateDir, TokenFile), tt.mode)
			trusttest.Chown(t, path, tt.uid, tt.gid)
			_, tokenErr := ReadToken(stateDir)
			_, credErr := readCredential(path)
			for what, err := range map[string]error{"ReadToken": tokenErr, "readCredential": credErr} {
				switch {
				case tt.wantErr == "" && err != nil:
					t.Errorf("%s = %v, want the secret", what, err)
				case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), path+": "+tt.wantErr)):
					t.Errorf("%s = %v, want an error with %q", what, err, path+": "+tt.wantErr)
				}
			}
			if tt.wantErr != "" {
				if _, err := ensureToken(stateDir); err == nil {
					t.Error("ensureToken accepted the token: the agent must refuse to start, not use or replace it")
				}
			}
		})
	}
}
