// Package druid is etcdlet's side of etcd-druid's externally managed mode
// (druid.gardener.cloud/v1alpha1 Etcd with spec.externallyManagedMemberAddresses):
//
//   - EtcdWatcher reads and watches the one Etcd resource of the cluster;
//   - AddressKeeper turns its member addresses into the agent's member list
//     (members.source: etcd-resource), checked by the rules of every other
//     source and kept on disk so that the agent works while the API is away;
//   - LeaseRenewer renews this member's Lease <etcd>-<ip> the way
//     etcd-backup-restore does, which is all druid reads to build
//     Etcd.status.members;
//   - ProtectionSwitch follows druid's
//     druid.gardener.cloud/disable-etcd-component-protection annotation.
//
// etcdlet never writes Etcd.status (druid owns it) and never the Etcd's
// spec.
package druid
