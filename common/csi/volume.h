/* What the CSI services know about volumes, shared by csi-controller, csi-node and csi-client:
 * the topology and context keys, access modes and capabilities, sizes.
 *
 *   if (!csi_cap_supported(cap, volume_is_multi_attach)) ...
 *   long long bytes;
 *   if (csi_parse_size("10Gi", &bytes) < 0) ...
 */
#pragma once
#include <stdbool.h>

#include "common/csi/csi.pb-c.h"

/* Topology keys. The node reports all three; volumes carry only the well-known zone key. */
#define CSI_TOPOLOGY_ZONE_KEY "topology.ebs.csi.aws.com/zone"
#define CSI_WELL_KNOWN_ZONE_KEY "topology.kubernetes.io/zone"
#define CSI_ZONE_ID_KEY "topology.k8s.aws/zone-id"
#define CSI_OS_KEY "kubernetes.io/os"
#define CSI_OUTPOST_KEY "topology.ebs.csi.aws.com/outpost-id"

/* Keys of the volume context and publish context. */
#define CSI_CTX_DEVICE_PATH "devicePath"

/* Helpers for handlers. */
/* The access type of a capability: true for block. */
bool csi_cap_is_block(const Csi__V1__VolumeCapability *cap);
/* Access modes this driver supports (SINGLE_NODE_* and, for block only,
 * MULTI_NODE_MULTI_WRITER when multi_attach is allowed). */
bool csi_cap_supported(const Csi__V1__VolumeCapability *cap, bool allow_multi_attach);
/* Parses a Kubernetes quantity ("10Gi", "500M", "1073741824") into bytes. */
int csi_parse_size(const char *s, long long *ret);
