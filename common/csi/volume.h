/* What the CSI services know about volumes, shared by csi-controller, csi-node and csi-client:
 * the topology and context keys, access modes and capabilities, sizes.
 *
 *   if (!csi_cap_supported(&cap, volume_is_multi_attach)) ...
 *   long long bytes;
 *   if (csi_parse_size("10Gi", &bytes) < 0) ...
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* Topology keys. The node reports all three; volumes carry only the well-known zone key. */
#define CSI_TOPOLOGY_ZONE_KEY "topology.ebs.csi.aws.com/zone"
#define CSI_WELL_KNOWN_ZONE_KEY "topology.kubernetes.io/zone"
#define CSI_ZONE_ID_KEY "topology.k8s.aws/zone-id"
#define CSI_OS_KEY "kubernetes.io/os"
#define CSI_OUTPOST_KEY "topology.ebs.csi.aws.com/outpost-id"

/* Keys of the volume context and publish context. */
#define CSI_CTX_DEVICE_PATH "devicePath"

/* A key and a value: an entry of a map of a request (parameters, contexts, secrets left out)
 * or of a reply, a tag. Arrays of them come with their length. */
struct csi_kv {
	const char *key;
	const char *value;
};

/* For an array whose strings are malloc'd: frees them and the array (NULL is fine). */
void csi_kv_free(struct csi_kv *kv, size_t n);
/* Sets key to a copy of value in such an array (the value of a key there already is
 * replaced; keys compared exactly): 0, -ENOMEM, -E2BIG past max entries. */
int csi_kv_set(struct csi_kv **kv, size_t *n, size_t max, const char *key, const char *value);
/* The value of key in kv, keys compared without case (the driver's keys are case-insensitive);
 * NULL when absent. */
const char *csi_kv_get(const struct csi_kv *kv, size_t n, const char *key);

/* CSI AccessMode.Mode values. */
enum {
	CSI_MODE_SINGLE_NODE_WRITER = 1,
	CSI_MODE_SINGLE_NODE_READER_ONLY = 2,
	CSI_MODE_MULTI_NODE_MULTI_WRITER = 5,
	CSI_MODE_SINGLE_NODE_SINGLE_WRITER = 6,
	CSI_MODE_SINGLE_NODE_MULTI_WRITER = 7,
};

/* A volume capability (CSI VolumeCapability), as the services see it. */
struct csi_cap {
	bool present;	     /* the request carried one */
	bool block;	     /* block access; else mount access (fs_type, mount_flags) */
	bool no_access_type; /* neither block nor mount access: never supported */
	int access_mode;     /* a CSI_MODE_*; 0 when the request has none */
	const char *fs_type; /* mount access: "" or NULL means the default */
	const char *const *mount_flags;
	size_t n_mount_flags;
};

/* Access modes this driver supports: SINGLE_NODE_* with block or mount access, and
 * MULTI_NODE_MULTI_WRITER with block access when allow_multi_attach (io1/io2 Multi-Attach). */
bool csi_cap_supported(const struct csi_cap *cap, bool allow_multi_attach);
/* Parses a Kubernetes quantity ("10Gi", "500M", "1073741824") into bytes. */
int csi_parse_size(const char *s, long long *ret);
