/* etcd in the converge run, as Deckhouse's control-plane-manager (and kubeadm's join) do it, with
 * the multi -> single step Deckhouse leaves to a person:
 *
 *   - the peers: the etcd mirror pods of the other nodes (kube-system, component=etcd,
 *     tier=control-plane; their annotation kubeadm.kubernetes.io/etcd.advertise-client-urls, as
 *     kubeadm finds them) and, when /var/lib/etcd/member exists, this node's own client URL;
 *   - no data here and no other etcd pod: the first master, its manifest as rendered;
 *   - no data, or data but no member (orphan: the data is moved aside to member.orphaned-<time>),
 *     or a member started elsewhere without data here (stale: removed): MemberAdd as a learner,
 *     the manifest with --initial-cluster (every member) and --initial-cluster-state=existing,
 *     its pod waited for, then MemberPromote once in sync (10 tries, 1 s x1.5);
 *     refused while the lone member still advertises a loopback peer URL;
 *   - a learner here: its manifest, then the promote;
 *   - the lone member: its peer URL set to the manifest's (what lets a second master join);
 *   - a voter without a leader (quorum lost): only when every other voting member is dead and
 *     on no node with the control-plane role (cpm_etcd_force_check), a snapshot into the backup
 *     folder, the manifest with --force-new-cluster (another checksum) until its pod is Ready and
 *     etcd lists this member alone, then the manifest without it; otherwise the step fails with
 *     the reason.
 *
 * The figure of a join (time and etcd calls from MemberAdd to the promote) is in the report's
 * step "etcd membership". */
#pragma once
#include <stddef.h>

#include "modules/cpm/cpm_converge.h"

/* The etcd step of the run: membership, the manifest, its pod; 0 or -errno with err set. */
int cpm_etcd_converge(const struct cpm_converge *c, char *err, size_t errlen);
