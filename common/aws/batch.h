/* Describe-by-ID batching: callers ask for one ID at a time; asks that arrive within a short
 * window are merged into one Describe call with up to max_ids IDs, and each caller gets its own
 * item. The first caller of a batch waits for the window (window_ns after the last arrival,
 * at most max_wait_ns after the first, or until the batch is full), makes the call and hands
 * the results out; the others wait. No thread is started.
 *
 * When AWS answers a batch with the kind's NotFound error (DescribeInstances fails as a whole
 * when one ID is unknown), the IDs named in the message are answered -ENOENT and the call is
 * repeated without them; when the message names none, the batch is split in halves. An ID
 * that the reply simply does not contain is -ENOENT too. Any other failure is given to every
 * caller of the batch.
 *
 *   struct aws_batcher *b;
 *   aws_batcher_new(client, &aws_batch_instances, NULL, &b);
 *   xmlDoc *item;                // root element: the <item> of the instance
 *   r = aws_batcher_get(b, "i-0123", &item, &err);
 *   aws_xml_text(xmlDocGetRootElement(item), "privateDnsName");
 *   xmlFreeDoc(item);
 */
#pragma once
#include <libxml/tree.h>
#include <stdint.h>

#include "common/aws/client.h"

struct aws_batch_kind {
	const char *name; /* "instances" */
	enum aws_service service;
	const char *action;	   /* "DescribeInstances" */
	const char *id_param;	   /* list parameter: "InstanceId" -> InstanceId.1, .2 ... */
	const char *item_lists;	   /* list elements down to the items, '/'-separated:
				    * "reservationSet/instancesSet" */
	const char *id_field;	   /* the ID inside an item: "instanceId" */
	const char *notfound_code; /* "InvalidInstanceID.NotFound" */
	const char *id_prefix;	   /* "i-": to find IDs in the NotFound message */
	unsigned max_ids;	   /* per call */
};

extern const struct aws_batch_kind aws_batch_instances;		   /* 100 per call */
extern const struct aws_batch_kind aws_batch_volumes;		   /* 500 */
extern const struct aws_batch_kind aws_batch_snapshots;		   /* 500 */
extern const struct aws_batch_kind aws_batch_volume_modifications; /* 500 */
/* By name ("instances", "volumes", "snapshots", "volume-modifications"), or NULL. */
const struct aws_batch_kind *aws_batch_kind_by_name(const char *name);

struct aws_batcher_opts {
	int64_t window_ns;   /* 0: 10 ms (wait this long after the last ask) */
	int64_t max_wait_ns; /* 0: 50 ms (never wait longer than this after the first) */
	unsigned max_ids;    /* 0: the kind's */
	/* For tests: replaces the AWS call. Fills *rep (rep->root / rep->result) for ids. */
	int (*fetch)(void *ud, const char *const *ids, size_t n, struct aws_reply *rep,
		     struct aws_error *err);
	void *fetch_ud;
};

struct aws_batcher;

int aws_batcher_new(struct aws_client *c, const struct aws_batch_kind *k,
		    const struct aws_batcher_opts *o, struct aws_batcher **ret);
/* Frees; no call may be in progress. */
void aws_batcher_free(struct aws_batcher *b);

/* Describes one ID. *ret is a new document (free with xmlFreeDoc) whose root element is a copy
 * of the item. -ENOENT when AWS does not know the ID; otherwise the errno of the failed call,
 * with err filled when not NULL. */
int aws_batcher_get(struct aws_batcher *b, const char *id, xmlDoc **ret, struct aws_error *err);

struct aws_batcher_stats {
	unsigned long asks;	 /* aws_batcher_get calls */
	unsigned long batches;	 /* batches run */
	unsigned long calls;	 /* Describe calls made (more than batches after NotFound splits) */
	unsigned long max_batch; /* largest number of IDs in one call */
};
void aws_batcher_stats(struct aws_batcher *b, struct aws_batcher_stats *ret);
