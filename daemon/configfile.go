package daemon

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/internal/filewatch"
)

// ConfigFile reloads the agent's configuration file when asked (SIGHUP,
// etcdlet reload, systemctl reload) and on its own when the file's
// content changes: an edit must never sit on disk, out of force, while
// etcdlet status computes its plan from it. A reload is checked as at
// start; what needs a restart is refused, naming the fields, and the
// record says so (ReloadFile) for etcdlet status and /readyz.
type ConfigFile struct {
	Path string
	// Load loads the file and checks it as at start (etcdlet validate).
	Load func(path string) (*config.Config, error)
	Log  *slog.Logger
}

// configSettle is how long the configuration file's directory must be
// quiet before a change is read: an editor that writes in place must not
// be read half-way (a rename over the file is read at once).
const configSettle = 250 * time.Millisecond

// Run reloads into agent on every value of asked, and after every change
// of the file's content, until ctx ends. A change back to the content
// last tried (or events about other files in the directory) reloads
// nothing.
func (f ConfigFile) Run(ctx context.Context, agent *Agent, asked <-chan os.Signal) {
	changed := make(chan struct{}, 1)
	watch := filewatch.New("configuration file", func() string { return f.Path }, configSettle, f.Log, func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	go func() {
		if err := watch.Run(ctx); err != nil {
			f.Log.Error("configuration file watch stopped; a change is applied only by etcdlet reload (systemctl reload etcdlet)", "config", f.Path, "error", err)
		}
	}()
	last := agent.cfg.Digest
	for {
		select {
		case <-ctx.Done():
			return
		case <-asked:
		case <-changed:
			if d, err := config.FileDigest(f.Path); err == nil && d == last {
				continue
			}
			f.Log.Info("configuration file changed; reloading it", "config", f.Path)
		}
		last = f.reload(ctx, agent)
	}
}

// reload loads the file and hands it to the agent, and returns the digest
// of the content it tried.
func (f ConfigFile) reload(ctx context.Context, agent *Agent) string {
	cfg, err := f.Load(f.Path)
	if err != nil {
		tried, _ := config.FileDigest(f.Path) // "" when it cannot be read
		f.Log.Error("configuration reload rejected; the running configuration stays in force", "config", f.Path, "problems", err.Error())
		agent.RejectReload(tried, err) // /readyz says so
		return tried
	}
	_ = agent.Reload(ctx, cfg) // logs its own outcome
	return cfg.Digest
}
