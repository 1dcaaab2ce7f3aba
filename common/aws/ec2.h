/* EC2 replies as structs: the one parser of the instance, volume, snapshot and
 * volume-modification items of EC2's Query replies, shared by ccm, csi-controller and the
 * modules to come. Nothing here makes a call; the caller gets the items from client.h (or the
 * batcher, batch.h) and hands them over:
 *
 *   struct ec2_volume *v;
 *   size_t n;
 *   r = ec2_volumes_parse(rep.result, false, &v, &n);     // every <item> of volumeSet
 *   ...
 *   ec2_volumes_free(v, n);
 *
 *   struct ec2_instance *list = NULL;
 *   size_t n = 0;
 *   r = ec2_instances_parse(rep.result, &list, &n);        // every reservation's instances
 *   for (size_t k = 0; k < n; k++) ec2_instance_release(&list[k]);
 *   free(list);
 *
 * Destructive decisions need evidence (README, "Reliability"): an item without the field a
 * decision rests on makes the parse fail with -EBADMSG, never a default: an instance without
 * instanceId or instanceState/name, a volume without volumeId or status, an attachment
 * without instanceId or status, a snapshot without snapshotId. Caps on what one item may hold
 * give -E2BIG. Every function returns 0 or -errno; none logs. */
#pragma once
#include <libxml/tree.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Caps on one instance item. */
#define EC2_MAX_ENIS 64
#define EC2_MAX_IPS_PER_ENI 128
#define EC2_MAX_TAGS 128
/* Cap on the items of one Describe reply gathered into an array. */
#define EC2_MAX_ITEMS 100000

struct ec2_tag {
	char *key;
	char *value;
};

/* The value of tag key, or NULL. */
const char *ec2_tags_get(const struct ec2_tag *tags, size_t n, const char *key);
void ec2_tags_free(struct ec2_tag *tags, size_t n);

/* ---- instances (DescribeInstances) ---- */

struct ec2_eni {
	char *id;
	char *status;		/* "in-use" when attached */
	long long device_index; /* attachment.deviceIndex; -1 when not attached */
	char **private_ips;	/* privateIpAddressesSet, in reply order (primary first) */
	char **ipv6s;		/* ipv6AddressesSet */
	bool source_dest_check;
};

struct ec2_instance {
	char *id;
	char *state; /* instanceState.name: pending running shutting-down terminated stopping
			stopped */
	char *type;
	char *zone;
	char *private_dns;
	char *public_dns;
	char *private_ip;
	char *public_ip;
	char *vpc_id;
	char *subnet_id;
	bool source_dest_check;
	struct ec2_eni *enis;
	size_t n_enis;
	struct ec2_tag *tags;
	size_t n_tags;
};

void ec2_instance_release(struct ec2_instance *i);
void ec2_instance_free(struct ec2_instance *i);
/* Deep copy. */
int ec2_instance_copy(const struct ec2_instance *src, struct ec2_instance *ret);
/* One <item> of a DescribeInstances instancesSet. -EBADMSG without an instanceId or a state,
 * -E2BIG over the caps on ENIs, addresses and tags. */
int ec2_instance_parse(const xmlNode *item, struct ec2_instance *ret);
/* Every instance of a DescribeInstances reply (all reservations), appended to *list. */
int ec2_instances_parse(const xmlNode *root, struct ec2_instance **list, size_t *n);
const char *ec2_instance_tag(const struct ec2_instance *i, const char *key);

/* ---- volumes (DescribeVolumes, CreateVolume) ---- */

struct ec2_attachment {
	char instance[32];
	char device[32];
	char state[16]; /* attaching, attached, detaching, detached, busy */
};

struct ec2_volume {
	char id[32];
	char az[48];
	char state[16]; /* creating, available, in-use, deleting, deleted, error */
	char type[16];
	char snapshot[32];
	char kms[256];
	char outpost[256];
	long long size_gib, iops, throughput;
	bool encrypted, multi_attach;
	struct ec2_tag *tags;
	size_t n_tags;
	struct ec2_attachment *att;
	size_t n_att;
};

void ec2_volume_release(struct ec2_volume *v);
void ec2_volumes_free(struct ec2_volume *v, size_t n);
/* One volume <item>. -EBADMSG without volumeId or status, or with an attachment without
 * instanceId or status. */
int ec2_volume_parse(const xmlNode *item, struct ec2_volume *ret);
/* Every <item> of the volumeSet of a reply; skip_deleted drops volumes "deleting" and
 * "deleted". -E2BIG past EC2_MAX_ITEMS. *ret is an array even when *ret_n is 0. */
int ec2_volumes_parse(const xmlNode *result, bool skip_deleted, struct ec2_volume **ret,
		      size_t *ret_n);

/* ---- snapshots (DescribeSnapshots, CreateSnapshot) ---- */

struct ec2_snapshot {
	char id[32];
	char volume[32];
	char state[16]; /* pending, completed, error */
	long long size_gib;
	int64_t start_ns; /* wall clock; 0 when unknown */
	struct ec2_tag *tags;
	size_t n_tags;
};

void ec2_snapshot_release(struct ec2_snapshot *s);
void ec2_snapshots_free(struct ec2_snapshot *s, size_t n);
/* One snapshot <item> (or a CreateSnapshot reply). -EBADMSG without snapshotId. */
int ec2_snapshot_parse(const xmlNode *item, struct ec2_snapshot *ret);
/* Every <item> of the snapshotSet of a reply; as ec2_volumes_parse. */
int ec2_snapshots_parse(const xmlNode *result, struct ec2_snapshot **ret, size_t *ret_n);

/* ---- volume modifications (DescribeVolumesModifications) ---- */

struct ec2_modification {
	char state[16]; /* modifying, optimizing, completed, failed */
	char message[256];
	long long target_size, target_iops, target_throughput;
	char target_type[16];
};

/* One <item> of volumeModificationSet. */
void ec2_modification_parse(const xmlNode *item, struct ec2_modification *ret);
