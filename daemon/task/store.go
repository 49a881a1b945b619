package task

import (
	"fmt"
	"slices"
	"sort"

	"github.com/etcdlet/etcdlet/daemon/state"
)

// StateFile is the file in the state dir that holds the tasks.
const StateFile = "tasks.json"

// MaxHistory bounds the completed tasks kept: the newest ones stay, so
// `etcdlet task list` shows recent outcomes and the file stays small.
const MaxHistory = 50

// Store persists the tasks.
type Store interface {
	Load() ([]Task, error)
	Save(tasks []Task) error
}

// FileStore keeps the tasks in StateFile of the state dir (0600, written
// atomically), through the state store's JSON files.
type FileStore struct{ State state.Store }

type taskFile struct {
	Tasks []Task `json:"tasks"`
}

// Load reads the tasks; none when the file does not exist.
func (s FileStore) Load() ([]Task, error) {
	var f taskFile
	if _, err := s.State.ReadJSON(StateFile, &f); err != nil {
		return nil, fmt.Errorf("load tasks: %w", err)
	}
	return f.Tasks, nil
}

// Save writes the tasks.
func (s FileStore) Save(tasks []Task) error {
	if err := s.State.WriteJSON(StateFile, taskFile{Tasks: tasks}); err != nil {
		return fmt.Errorf("save tasks: %w", err)
	}
	return nil
}

// trimHistory drops the oldest completed tasks beyond MaxHistory; tasks
// that are not completed (or not cleaned up) always stay.
func trimHistory(tasks []Task) []Task {
	var done []int
	for i, t := range tasks {
		if t.Phase.Completed() && t.Cleaned {
			done = append(done, i)
		}
	}
	if len(done) <= MaxHistory {
		return tasks
	}
	sort.SliceStable(done, func(a, b int) bool {
		return tasks[done[a]].LastTransitionTime.Before(tasks[done[b]].LastTransitionTime)
	})
	drop := map[int]bool{}
	for _, i := range done[:len(done)-MaxHistory] {
		drop[i] = true
	}
	kept := tasks[:0:0]
	for i, t := range tasks {
		if !drop[i] {
			kept = append(kept, t)
		}
	}
	return kept
}

func sortedStrings(s []string) []string {
	slices.Sort(s)
	return s
}
