package etcdclient

import "fmt"

// etcdlet's own keys in the cluster's keyspace, all of them under
// AgentKeyPrefix and all spelled here: the agents' coordination by
// cluster ID (the writer lock, the Board), and the ops tasks' by
// cluster.name (the task lock, the schedule records).

// AgentKeyPrefix holds etcdlet's own coordination keys. Snapshots keep
// them, restores drop them (a restored cluster starts with no lock held
// and no agent's post), and a delta of nothing but them has no news.
const AgentKeyPrefix = "/etcdlet/"

// ClusterKeys is the prefix of the keys where the agents of one cluster
// coordinate: the writer lock and the Board. It derives from the cluster's
// ID, not from cluster.name, which a misconfigured node can get wrong; the
// "_" cannot appear in a cluster name, so no name's keys collide with it.
func ClusterKeys(clusterID uint64) string { return fmt.Sprintf("%s_id/%x/", AgentKeyPrefix, clusterID) }

// WriterLockKey is the prefix of the agents' writer lock of a cluster:
// the etcd mutex's keys are this prefix, a slash, and each contender's
// lease ID in hex. It derives from the cluster's ID, never its name: a
// node configured with another cluster.name that reaches this cluster
// contends for the same lock.
func WriterLockKey(clusterID uint64) string { return ClusterKeys(clusterID) + "membership-lock" }

// TaskLockKey is the key of the cluster-wide task lock of cluster.name
// cluster.
func TaskLockKey(cluster string) string { return AgentKeyPrefix + cluster + "/task-lock" }

// ScheduleKey records when the scheduled task of type typ last
// succeeded in cluster.name cluster.
func ScheduleKey(cluster, typ string) string { return AgentKeyPrefix + cluster + "/tasks/last/" + typ }

// MemberListKey holds the member list of a cluster whose list is kept in
// the cluster itself (members.source cluster). Like the Board it derives
// from the cluster's ID: a host configured with another cluster.name
// that reaches this cluster reads and edits the same list, and a restored
// cluster (a new ID) starts with none.
func MemberListKey(clusterID uint64) string { return ClusterKeys(clusterID) + "member-list" }
