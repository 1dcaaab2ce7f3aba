/* Device names for attachments, allocated per node: the upstream driver's list and order,
 * checked against the instance's block-device mappings and the attachments in flight, with
 * the names AWS refused moved to the end for an hour. Thread-safe. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/timeutil.h"
#include "modules/csi-controller/csi_controller_internal.h"

#define MAX_NODES 100000
#define BAD_TTL_NS (3600 * NSEC_PER_SEC)

/* /dev/xvdaa..xvdaz, xvdba..xvdbz, xvdda..xvddx, xvdb..xvdz, sdb..sdz, sda2: 127 names; the
 * first 52 work on every instance type. */
#define B_TO_X(p)                                                                                  \
	p "b", p "c", p "d", p "e", p "f", p "g", p "h", p "i", p "j", p "k", p "l", p "m", p "n", \
	    p "o", p "p", p "q", p "r", p "s", p "t", p "u", p "v", p "w", p "x"
#define A_TO_X(p) p "a", B_TO_X(p)
#define A_TO_Z(p) A_TO_X(p), p "y", p "z"
#define B_TO_Z(p) B_TO_X(p), p "y", p "z"

const char *const csi_device_names[] = {
    A_TO_Z("/dev/xvda"), A_TO_Z("/dev/xvdb"), A_TO_X("/dev/xvdd"),
    B_TO_Z("/dev/xvd"),	 B_TO_Z("/dev/sd"),   "/dev/sda2",
};
const size_t csi_n_device_names = ARRAY_SIZE(csi_device_names);

struct held {
	char *volume;
	char name[CSI_DEVICE_NAME_MAX];
	int64_t since; /* monotonic time of the pick */
};

struct bad {
	char name[CSI_DEVICE_NAME_MAX];
	int64_t until;
};

struct node_devs {
	char *node;
	struct held *held;
	size_t n_held;
	struct bad bad[16];
	size_t n_bad;
};

struct csi_devices {
	pthread_mutex_t lock;
	struct node_devs *nodes;
	size_t n_nodes;
};

int csi_devices_new(struct csi_devices **ret)
{
	struct csi_devices *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	*ret = d;
	return 0;
}

static void node_clear(struct node_devs *n)
{
	for (size_t i = 0; i < n->n_held; i++)
		free(n->held[i].volume);
	free(n->held);
	free(n->node);
}

void csi_devices_free(struct csi_devices *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n_nodes; i++)
		node_clear(&d->nodes[i]);
	free(d->nodes);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* The part after /dev/sd or /dev/xvd: AWS maps both spellings to one device. */
static const char *dev_suffix(const char *name)
{
	if (str_has_prefix(name, "/dev/"))
		name += 5;
	if (str_has_prefix(name, "xvd"))
		return name + 3;
	if (str_has_prefix(name, "sd"))
		return name + 2;
	return name;
}

static bool same_device(const char *a, const char *b)
{
	return strcmp(dev_suffix(a), dev_suffix(b)) == 0;
}

static void expire_bad(struct node_devs *n, int64_t now)
{
	size_t k = 0;
	for (size_t i = 0; i < n->n_bad; i++)
		if (n->bad[i].until > now)
			n->bad[k++] = n->bad[i];
	n->n_bad = k;
}

static struct node_devs *node_get(struct csi_devices *d, const char *node, bool create)
{
	for (size_t i = 0; i < d->n_nodes; i++)
		if (strcmp(d->nodes[i].node, node) == 0)
			return &d->nodes[i];
	if (!create || d->n_nodes >= MAX_NODES)
		return NULL;
	struct node_devs *nn = realloc(d->nodes, (d->n_nodes + 1) * sizeof(*nn));
	if (!nn)
		return NULL;
	d->nodes = nn;
	memset(&nn[d->n_nodes], 0, sizeof(nn[0]));
	if (!(nn[d->n_nodes].node = strdup(node)))
		return NULL;
	return &nn[d->n_nodes++];
}

/* Drops a node entry that holds nothing. */
static void node_gc(struct csi_devices *d, struct node_devs *n)
{
	expire_bad(n, now_mono_ns());
	if (n->n_held || n->n_bad)
		return;
	node_clear(n);
	size_t i = (size_t)(n - d->nodes);
	d->nodes[i] = d->nodes[--d->n_nodes];
}

static bool name_taken(const struct node_devs *n, const char *name, const char *volume,
		       const char *const *used, size_t n_used)
{
	for (size_t i = 0; i < n_used; i++)
		if (used[i] && same_device(used[i], name))
			return true;
	for (size_t i = 0; i < n->n_held; i++)
		if (strcmp(n->held[i].volume, volume) != 0 && same_device(n->held[i].name, name))
			return true;
	return false;
}

static bool name_bad(const struct node_devs *n, const char *name)
{
	for (size_t i = 0; i < n->n_bad; i++)
		if (strcmp(n->bad[i].name, name) == 0)
			return true;
	return false;
}

int csi_devices_pick(struct csi_devices *d, const char *node, const char *volume,
		     const char *const *used, size_t n_used, char ret[CSI_DEVICE_NAME_MAX])
{
	struct node_devs *n;
	const char *pick = NULL;
	int r = 0;

	pthread_mutex_lock(&d->lock);
	if (!(n = node_get(d, node, true))) {
		r = -ENOMEM;
		goto out;
	}
	expire_bad(n, now_mono_ns());
	for (size_t i = 0; i < n->n_held; i++)
		if (strcmp(n->held[i].volume, volume) == 0) {
			str_copy(ret, CSI_DEVICE_NAME_MAX, n->held[i].name);
			goto out;
		}
	for (int pass = 0; pass < 2 && !pick; pass++)
		for (size_t i = 0; i < csi_n_device_names && !pick; i++) {
			const char *c = csi_device_names[i];
			if (name_bad(n, c) != (pass == 1))
				continue;
			if (!name_taken(n, c, volume, used, n_used))
				pick = c;
		}
	if (!pick) {
		r = -ENOSPC;
		node_gc(d, n);
		goto out;
	}
	struct held *nh = realloc(n->held, (n->n_held + 1) * sizeof(*nh));
	if (!nh) {
		r = -ENOMEM;
		goto out;
	}
	n->held = nh;
	if (!(nh[n->n_held].volume = strdup(volume))) {
		r = -ENOMEM;
		goto out;
	}
	str_copy(nh[n->n_held].name, CSI_DEVICE_NAME_MAX, pick);
	nh[n->n_held].since = now_mono_ns();
	n->n_held++;
	str_copy(ret, CSI_DEVICE_NAME_MAX, pick);
out:
	pthread_mutex_unlock(&d->lock);
	return r;
}

void csi_devices_release(struct csi_devices *d, const char *node, const char *volume)
{
	struct node_devs *n;

	pthread_mutex_lock(&d->lock);
	if ((n = node_get(d, node, false))) {
		for (size_t i = 0; i < n->n_held; i++)
			if (strcmp(n->held[i].volume, volume) == 0) {
				free(n->held[i].volume);
				n->held[i] = n->held[--n->n_held];
				break;
			}
		node_gc(d, n);
	}
	pthread_mutex_unlock(&d->lock);
}

void csi_devices_mark_bad(struct csi_devices *d, const char *node, const char *name)
{
	struct node_devs *n;
	int64_t now = now_mono_ns();

	pthread_mutex_lock(&d->lock);
	if ((n = node_get(d, node, true))) {
		expire_bad(n, now);
		size_t i;
		for (i = 0; i < n->n_bad; i++)
			if (strcmp(n->bad[i].name, name) == 0)
				break;
		if (i == n->n_bad) {
			if (n->n_bad == ARRAY_SIZE(n->bad)) { /* forget the oldest */
				memmove(&n->bad[0], &n->bad[1], (n->n_bad - 1) * sizeof(n->bad[0]));
				i = --n->n_bad;
			}
			n->n_bad++;
		}
		str_copy(n->bad[i].name, CSI_DEVICE_NAME_MAX, name);
		n->bad[i].until = now + BAD_TTL_NS;
	}
	pthread_mutex_unlock(&d->lock);
}

size_t csi_devices_held(struct csi_devices *d, const char *node)
{
	struct node_devs *n;
	size_t k = 0;

	pthread_mutex_lock(&d->lock);
	if ((n = node_get(d, node, false)))
		k = n->n_held;
	pthread_mutex_unlock(&d->lock);
	return k;
}

int64_t csi_devices_held_since(struct csi_devices *d, const char *node, const char *volume)
{
	struct node_devs *n;
	int64_t since = 0;

	pthread_mutex_lock(&d->lock);
	if ((n = node_get(d, node, false)))
		for (size_t i = 0; i < n->n_held; i++)
			if (strcmp(n->held[i].volume, volume) == 0)
				since = n->held[i].since;
	pthread_mutex_unlock(&d->lock);
	return since;
}
