package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/pflag"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/instancelock"
)

// configDir is where the packaged units read the configurations:
// config.yaml for etcdlet.service, <name>.yaml for etcdlet@<name>.service.
const configDir = "/etc/etcdlet"

// instance is another etcdlet configuration on this host.
type instance struct {
	path string
	cfg  *config.Config
}

// otherInstances are the valid etcdlet configurations beside path (the
// other *.yaml files in its directory): the other agents this host may
// run. A file that is not a valid configuration is none: its agent
// cannot start.
func otherInstances(path string) ([]instance, error) {
	self, err := canonicalPath(path)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(filepath.Dir(self), "*.yaml"))
	if err != nil {
		return nil, err
	}
	var others []instance
	for _, file := range files {
		if canonical, err := canonicalPath(file); err != nil || canonical == self {
			continue
		}
		if problems, cfg, err := validateConfig(file); err == nil && cfg != nil && len(problems) == 0 {
			others = append(others, instance{file, cfg})
		}
	}
	return others, nil
}

func canonicalPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real, nil
	}
	return abs, nil
}

// instanceConflicts are what cfg (read from path) shares with the other
// instances of this host (config.Config.ConflictsWith). running keeps only
// those whose agent runs now, which holds its state dir locked.
func instanceConflicts(path string, cfg *config.Config, running bool) (config.Errors, error) {
	others, err := otherInstances(path)
	if err != nil {
		return nil, fmt.Errorf("find the other etcdlet configurations beside %s: %w", path, err)
	}
	var problems config.Errors
	for _, o := range others {
		conflicts := cfg.ConflictsWith(o.cfg, o.path)
		if len(conflicts) == 0 {
			continue
		}
		if running {
			// The same state dir: this agent's own lock, which already
			// keeps the other one from starting.
			if filepath.Clean(o.cfg.Agent.StateDir) == filepath.Clean(cfg.Agent.StateDir) {
				continue
			}
			if held, err := instancelock.Held(o.cfg.Agent.StateDir); err != nil || !held {
				continue
			}
		}
		problems = append(problems, conflicts...)
	}
	return problems, nil
}

// refuseBesideRunningInstances fails when cfg shares a port, a directory
// or a member with an instance that runs: the agent holds its own state
// dir first, so of two agents that start together, the second sees the
// first. An instance that does not run stops nobody, so that a broken
// new file never keeps a running cluster's agent from restarting.
func refuseBesideRunningInstances(path string, cfg *config.Config) error {
	problems, err := instanceConflicts(path, cfg, true)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s shares with an etcdlet instance that runs on this host:\n%s", path, problems.Error())
	}
	return nil
}

// instanceName is a unit instance name etcdlet@<name>.service reads the
// configuration of: /etc/etcdlet/<name>.yaml.
var instanceName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// instanceFlag is --instance: it sets the configuration path to the one
// etcdlet@<name>.service reads.
type instanceFlag struct{ path *string }

func (f instanceFlag) String() string { return "" }
func (f instanceFlag) Type() string   { return "name" }

func (f instanceFlag) Set(name string) error {
	if !instanceName.MatchString(name) || len(name) > 63 {
		return fmt.Errorf("%q: an instance name is lower-case letters, digits and '-', at most 63 characters, as in etcdlet@events.service", name)
	}
	*f.path = filepath.Join(configDir, name+".yaml")
	return nil
}

func addInstanceFlag(flags *pflag.FlagSet, path *string) {
	flags.VarP(instanceFlag{path}, "instance", "i", strings.Join([]string{
		"the cluster instance to act on: etcdlet@<name>.service,",
		"configured in " + configDir + "/<name>.yaml (instead of --config)"}, " "))
}
