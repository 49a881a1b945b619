// Package pacemakercluster keeps OpenShift's PacemakerCluster singleton
// (etcd.openshift.io, cluster-scoped, named "cluster") equal to the status
// this agent's pacemaker poll built, with exactly one writer among the
// agents of the cluster at steady state.
//
// # Who writes
//
// Every control-plane host runs an agent, and on two-node OpenShift both
// poll pacemaker. The writer is chosen from what pacemaker and the stored
// object say, without a lease of its own:
//
//  1. The agent on pacemaker's DC node writes. Pacemaker elects exactly one
//     DC (designated controller) among the nodes with quorum, and the
//     survivor becomes DC when the other node leaves, so when the writer's
//     node goes away the other agent takes over because its node became DC.
//  2. An agent whose pacemaker state is unknown (no status was built)
//     writes nothing, whatever its role: it has nothing truthful to say.
//     The same holds when its poll has offered nothing for StaleAfter.
//  3. An agent that is not on the DC node takes over when the stored status
//     is stale: its lastUpdated (or the absence of any status) has not
//     changed for StaleAfter, timed by this agent's own clock from the
//     moment it first saw that value. The DC's agent is then dead, or cut
//     off from the API server while pacemaker still runs on its node.
//     Staleness is observed rather than computed from lastUpdated against
//     the local clock, because lastUpdated comes from another host's clock:
//     a skew larger than StaleAfter would otherwise make a live writer look
//     dead (and the two agents alternate) or a dead one look alive.
//     The takeover is reported with the Event PacemakerStatusWriterTakeover.
//  4. The takeover is sticky: an agent that is not on the DC node keeps
//     writing while the object names it as the last writer (see below),
//     i.e. while the DC's agent stays silent. Without this rule the
//     takeover would end at once (its own write makes the status fresh, so
//     "not stale" would send it back to standby) and the two agents would
//     alternate.
//  5. When the DC's agent comes back it claims the role back and writes;
//     the other agent sees another writer named, with a fresh write, and
//     steps back. Conflicting writes during such a transition are resolved
//     by optimistic concurrency: the loser re-reads the object and decides
//     again.
//
// Without any DC (no partition has one, or crm_mon does not say) no agent
// writes by rule 1, the status goes stale, and the first agent to notice
// takes over by rule 3 and keeps it by rule 4. With two DCs (a split brain
// before fencing resolves it) both agents write until pacemaker has one DC
// again.
//
// The last writer is recorded on the object: the annotation
// etcdlet.io/status-writer (WriterAnnotation) names the pacemaker node
// whose agent claimed the role last. An agent sets it when it creates the
// singleton, and by a PATCH locked to the resourceVersion it read whenever
// it writes while the annotation names another node (the DC's agent taking
// the role back, or a takeover), so two claims cannot both succeed on the
// same version. At steady state the annotation does not change and costs
// nothing. (managedFields would come for free with the status update, but
// the API server does not maintain them for every Update: the
// kube-apiserver 1.37.1 of our envtest records none for Create and Update,
// only for Apply.) Writers outside etcdlet (OpenShift's own collector, say)
// leave the annotation alone; their writes still count as activity, and
// the DC's agent, not finding its own write stored, writes again.
//
// For the standby to see that the writer is alive, every write changes
// lastUpdated: it is this agent's clock truncated to the second (the API's
// precision), or the stored value plus one second when that is not later.
// The CRD only demands lastUpdated >= stored, but an equal value would make
// the write invisible (no change to observe; an identical object is not
// even stored anew), and a live writer would look dead.
//
// # How it writes
//
// One round is one GET of the singleton and at most one UPDATE of its
// /status, plus a CREATE (without status: the API server strips it on
// create) the first time, or the claim's PATCH when the writer changes.
// Every write carries the resourceVersion read, so a concurrent write
// fails with a conflict; the round is then re-run from the GET, at most
// maxAttempts times, after a random pause of a few milliseconds. Before
// anything is sent the object is checked with status.Validate, the Go form
// of the CRD's rules; a status that fails is refused (ErrRefused, Event
// PacemakerStatusRefused) and nothing is written. An unchanged status is rewritten every
// RefreshInterval, so that a stale status means the writer is gone; in
// between, rounds that find the stored status equal to the offered one
// (apart from lastUpdated) and written by this agent write nothing.
//
// Run drives the rounds: on an offer that matters (the first, a change of
// DC or of known/unknown, or a changed status while this agent writes),
// every RefreshInterval, and after a failure on kube.Backoff (1s doubling
// to 1m). Offer never blocks the pacemaker poll.
package pacemakercluster
