package memberlist

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/etcdlet/etcdlet/internal/atomicfile"
)

// KeepCopy writes the agent's copy of a list kept from elsewhere (the
// Etcd resource's, the cluster's) to path: header (comment lines, each
// ending in a newline) and then one address per line, atomically, 0600 in
// a 0700 directory. It writes only when the addresses differ from the
// copy's, and says whether it wrote; the Source reads the copy like a
// members file and ignores the header.
func KeepCopy(path, header string, list []string) (bool, error) {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	body := strings.Join(list, "\n") + "\n"
	if bytes.HasSuffix(old, []byte("\n"+body)) {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, fmt.Errorf("keep the member list: %w", err)
	}
	if err := atomicfile.Write(path, []byte(header+body), 0o600); err != nil {
		return false, fmt.Errorf("keep the member list: %w", err)
	}
	return true, nil
}
