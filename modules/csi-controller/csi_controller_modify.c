/* ControllerExpandVolume and ControllerModifyVolume through a per-volume coalescer: calls for
 * one volume that arrive within --modify-volume-request-handler-timeout are merged into one
 * EC2 ModifyVolume (EC2 allows one modification per volume every six hours, so a resize and a
 * VolumeAttributesClass change arriving together must not spend two); conflicting values are
 * refused. The first call of a window makes the EC2 calls; the others wait for its result. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/aws/client.h"
#include "common/aws/error.h"
#include "common/aws/ids.h"
#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/csi-controller/csi_controller_internal.h"
#include "modules/csi-controller/csi_controller_tagtpl.h"

#define MAX_MOD_TAGS 50

struct mod {
	long long size_gib; /* 0: unchanged */
	char type[16];	    /* "": unchanged */
	long long iops, tput;
	struct csi_kv tags[MAX_MOD_TAGS];
	size_t n_tags;
};

struct pending {
	char volume[32];
	struct mod m;
	bool running, done;
	struct csi_error err;
	long long final_gib;
	unsigned users;
	pthread_cond_t cond;
	struct pending *next;
};

struct coalescer {
	pthread_mutex_t lock;
	struct pending *list;
};

int csi_coalescer_new(struct coalescer **ret)
{
	struct coalescer *co = calloc(1, sizeof(*co));
	if (!co)
		return -ENOMEM;
	pthread_mutex_init(&co->lock, NULL);
	*ret = co;
	return 0;
}

static void pending_free(struct pending *p)
{
	for (size_t i = 0; i < p->m.n_tags; i++) {
		free((char *)p->m.tags[i].key);
		free((char *)p->m.tags[i].value);
	}
	pthread_cond_destroy(&p->cond);
	free(p);
}

void csi_coalescer_free(struct coalescer *co)
{
	if (!co)
		return;
	while (co->list) {
		struct pending *n = co->list->next;
		pending_free(co->list);
		co->list = n;
	}
	pthread_mutex_destroy(&co->lock);
	free(co);
}

/* Merges b into a; the name of the conflicting field, or NULL. */
static const char *merge(struct mod *a, const struct mod *b)
{
	if (b->size_gib && a->size_gib && a->size_gib != b->size_gib)
		return "size";
	if (*b->type && *a->type && strcmp(a->type, b->type) != 0)
		return "type";
	if (b->iops && a->iops && a->iops != b->iops)
		return "iops";
	if (b->tput && a->tput && a->tput != b->tput)
		return "throughput";
	if (a->n_tags + b->n_tags > MAX_MOD_TAGS)
		return "tags (too many)";
	if (b->size_gib)
		a->size_gib = b->size_gib;
	if (*b->type)
		str_copy(a->type, sizeof(a->type), b->type);
	if (b->iops)
		a->iops = b->iops;
	if (b->tput)
		a->tput = b->tput;
	for (size_t i = 0; i < b->n_tags; i++) {
		a->tags[a->n_tags].key = strdup(b->tags[i].key);
		a->tags[a->n_tags].value = strdup(b->tags[i].value);
		a->n_tags++;
	}
	return NULL;
}

/* The result of the merged modification: from AWS's error (r, e). */
static void aws_fail(struct pending *p, int r, const struct aws_error *e, const char *what,
		     enum csi_code fallback)
{
	char msg[512];
	enum csi_code code = fallback;

	if (r == -ENOENT)
		code = CSI_NOT_FOUND;
	else if (r == -EAGAIN || r == -ETIMEDOUT || r == -ECONNREFUSED)
		code = CSI_UNAVAILABLE;
	else if (aws_error_is(e, "VolumeModificationRateExceeded") ||
		 aws_error_is(e, "IncorrectModificationState"))
		code = CSI_RESOURCE_EXHAUSTED;
	else if (str_has_prefix(e->code, "InvalidParameter"))
		code = CSI_INVALID_ARGUMENT;
	csi_error_set(&p->err, code, "%s: %s", what, aws_error_str(e, msg, sizeof(msg)));
}

/* What the merged modification asks of EC2 for volume v: only what differs from it. */
struct change {
	const struct csi_vol_type *t;
	const char *type; /* the type it ends with */
	long long gib;	  /* 0: the size stays */
	bool type_change;
	long long iops, tput; /* 0: unchanged */
	long long size;	      /* the size it ends with */
};

/* Checks the change against the type's limits as CreateVolume does. */
static enum csi_code plan_change(struct pending *p, const struct ec2_volume *v, struct change *ch)
{
	char msg[256];

	ch->type = *p->m.type ? p->m.type : v->type;
	ch->t = csi_vol_type_find(ch->type);
	ch->gib = p->m.size_gib > v->size_gib ? p->m.size_gib : 0;
	ch->type_change = *p->m.type && strcasecmp(p->m.type, v->type) != 0;
	ch->iops = p->m.iops && p->m.iops != v->iops ? p->m.iops : 0;
	ch->tput = p->m.tput && p->m.tput != v->throughput ? p->m.tput : 0;
	p->final_gib = ch->gib ? ch->gib : v->size_gib;
	if (!ch->t)
		return csi_error_set(&p->err, CSI_INVALID_ARGUMENT, "unknown volume type %s",
				     ch->type);
	ch->size = ch->gib ? ch->gib : v->size_gib;
	if (ch->gib && (ch->size < ch->t->min_gib || ch->size > ch->t->max_gib))
		return csi_error_set(&p->err, CSI_OUT_OF_RANGE,
				     "%s volumes must be %lld to %lld GiB, not %lld", ch->t->name,
				     ch->t->min_gib, ch->t->max_gib, ch->size);
	if (ch->iops) {
		struct csi_vol_params vp = {.iops_set = true, .iops = ch->iops};
		if (csi_iops_resolve(ch->t, &vp, ch->size, &ch->iops, msg, sizeof(msg)) < 0)
			return csi_error_set(&p->err, CSI_INVALID_ARGUMENT, "%s", msg);
	} else if (ch->type_change && ch->t->iops_required && !v->iops) {
		return csi_error_set(&p->err, CSI_INVALID_ARGUMENT, "changing to %s needs iops",
				     ch->t->name);
	}
	if (ch->tput && csi_throughput_check(ch->t, ch->tput, ch->iops ? ch->iops : v->iops, msg,
					     sizeof(msg)) < 0)
		return csi_error_set(&p->err, CSI_INVALID_ARGUMENT, "%s", msg);
	return csi_error_ok(&p->err);
}

/* ModifyVolume, unless a modification to the same target is running already (a retried
 * call); ABORTED while one to another target runs. */
static enum csi_code start_change(struct csi_ctrl *c, struct pending *p, const struct change *ch)
{
	struct ec2_modification cur;
	struct aws_error aerr = {0};
	int r = ec2_describe_modification(c, p->volume, &cur, &aerr);
	bool running =
	    r == 0 && (strcmp(cur.state, "modifying") == 0 || strcmp(cur.state, "optimizing") == 0);
	bool same = running && (!ch->gib || cur.target_size == ch->gib) &&
		    (!ch->type_change || strcasecmp(cur.target_type, ch->type) == 0) &&
		    (!ch->iops || cur.target_iops == ch->iops) &&
		    (!ch->tput || cur.target_throughput == ch->tput);

	if (running && !same)
		return csi_error_set(
		    &p->err, CSI_ABORTED,
		    "volume %s is being modified already (to %lld GiB %s); try again later",
		    p->volume, cur.target_size, cur.target_type);
	if (running)
		return csi_error_ok(&p->err);
	aws_error_clear(&aerr);
	if ((r = ec2_modify_volume(c, p->volume, ch->gib, ch->type_change ? ch->t->name : NULL,
				   ch->iops, ch->tput, &aerr)) < 0) {
		aws_fail(p, r, &aerr, "modifying the volume", CSI_INTERNAL);
		return p->err.code;
	}
	log_info("volume modification started", KV_S("volume", p->volume), KV_I("gib", ch->gib),
		 KV_S("type", ch->type_change ? ch->t->name : ""), KV_I("iops", ch->iops),
		 KV_I("throughput", ch->tput));
	return csi_error_ok(&p->err);
}

/* Waits for "optimizing" (the new size is usable: the file system can grow) or "completed". */
static void wait_change(struct csi_ctrl *c, const struct csi_ctrl_call *call, struct pending *p)
{
	struct ec2_modification cur;
	struct aws_error aerr;
	int r;

	for (int64_t delay = 500 * NSEC_PER_MSEC;;) {
		aws_error_clear(&aerr);
		r = ec2_describe_modification(c, p->volume, &cur, &aerr);
		if (r < 0 && r != -ENOENT) {
			aws_fail(p, r, &aerr, "describing the modification", CSI_INTERNAL);
			return;
		}
		if (r == 0 &&
		    (strcmp(cur.state, "optimizing") == 0 || strcmp(cur.state, "completed") == 0)) {
			csi_error_ok(&p->err);
			return;
		}
		if (r == 0 && strcmp(cur.state, "failed") == 0) {
			csi_error_set(&p->err, CSI_INTERNAL, "the modification of %s failed: %s",
				      p->volume, cur.message);
			return;
		}
		if (!ctrl_sleep(call, delay / c->poll_scale)) {
			csi_error_set(&p->err, CSI_DEADLINE_EXCEEDED,
				      "volume %s is still being modified", p->volume);
			return;
		}
		delay = delay * 2 > 5 * NSEC_PER_SEC ? 5 * NSEC_PER_SEC : delay * 2;
	}
}

/* Runs the merged modification (no lock held): tags, then the volume's change. */
static void execute(struct csi_ctrl *c, const struct csi_ctrl_call *call, struct pending *p)
{
	struct ec2_volume v = {0};
	struct aws_error aerr = {0};
	struct change ch;
	int r;

	if ((r = ec2_describe_volume(c, p->volume, &v, &aerr)) < 0) {
		aws_fail(p, r, &aerr, "looking up the volume", CSI_INTERNAL);
		return;
	}
	if (plan_change(p, &v, &ch) != CSI_OK)
		goto out;
	if (p->m.n_tags && (r = ec2_create_tags(c, p->volume, p->m.tags, p->m.n_tags, &aerr)) < 0) {
		aws_fail(p, r, &aerr, "tagging the volume", CSI_INTERNAL);
		goto out;
	}
	if ((ch.gib || ch.type_change || ch.iops || ch.tput) && start_change(c, p, &ch) == CSI_OK)
		wait_change(c, call, p);
out:
	ec2_volume_release(&v);
}

/* Takes part in the volume's pending modification (the first caller of a window owns it):
 * m merged in, then its result, with the resulting size. */
static struct pending *join(struct coalescer *co, const char *volume, const struct mod *m,
			    bool *ret_owner, struct csi_error *err)
{
	struct pending *p;
	const char *conflict;

	for (p = co->list; p; p = p->next)
		if (strcmp(p->volume, volume) == 0 && !p->running)
			break;
	*ret_owner = !p;
	if (p && (conflict = merge(&p->m, m))) {
		csi_error_set(err, CSI_ABORTED, "a modification of %s with another %s is pending",
			      volume, conflict);
		return NULL;
	}
	if (!p) {
		if (!(p = calloc(1, sizeof(*p)))) {
			csi_error_set(err, CSI_RESOURCE_EXHAUSTED, "out of memory");
			return NULL;
		}
		str_copy(p->volume, sizeof(p->volume), volume);
		pthread_cond_init(&p->cond, NULL);
		merge(&p->m, m);
		p->next = co->list;
		co->list = p;
	}
	p->users++;
	return p;
}

/* Queues m for the volume and returns the result of the merged call, with the resulting
 * size. */
static enum csi_code coalesce(struct csi_ctrl *c, const struct csi_ctrl_call *call,
			      const char *volume, const struct mod *m, long long *ret_gib,
			      struct csi_error *err)
{
	struct coalescer *co = c->coalescer;
	struct pending *p;
	bool owner;

	pthread_mutex_lock(&co->lock);
	p = join(co, volume, m, &owner, err);
	pthread_mutex_unlock(&co->lock);
	if (!p)
		return err->code;
	if (owner) {
		bool ok = ctrl_sleep(call, c->modify_window_ns);
		pthread_mutex_lock(&co->lock);
		p->running = true;
		pthread_mutex_unlock(&co->lock);
		if (!ok)
			csi_error_set(&p->err, CSI_ABORTED, "stopping");
		else
			execute(c, call, p);
		pthread_mutex_lock(&co->lock);
		p->done = true;
		pthread_cond_broadcast(&p->cond);
	} else {
		pthread_mutex_lock(&co->lock);
		while (!p->done)
			pthread_cond_wait(&p->cond, &co->lock);
	}
	*err = p->err;
	*ret_gib = p->final_gib;
	if (--p->users == 0) {
		for (struct pending **pp = &co->list; *pp; pp = &(*pp)->next)
			if (*pp == p) {
				*pp = p->next;
				break;
			}
		pending_free(p);
	}
	pthread_mutex_unlock(&co->lock);
	return err->code;
}

enum csi_code csi_ctrl_expand(struct csi_ctrl *c, const struct csi_ctrl_call *call,
			      const char *volume_id, bool has_range, long long required,
			      long long limit, const struct csi_cap *cap, long long *ret_bytes,
			      bool *ret_node_expansion, struct csi_error *err)
{
	struct mod m = {0};
	long long gib = 0;

	if (!*volume_id)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "volume id is missing");
	if (!aws_volume_id_valid(volume_id))
		return ctrl_bad_id(err, "volume id", volume_id);
	if (!has_range)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "capacity range is missing");
	if (required < 0 || limit < 0 || (limit && required > limit))
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "invalid capacity range");
	if (required == 0)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "required_bytes is missing");
	m.size_gib = required / GIB + (required % GIB != 0);
	if (limit && m.size_gib * GIB > limit)
		return csi_error_set(err, CSI_OUT_OF_RANGE,
				     "%lld bytes rounded up to %lld GiB exceed limit_bytes %lld",
				     required, m.size_gib, limit);
	if (coalesce(c, call, volume_id, &m, &gib, err) != CSI_OK)
		return err->code;
	*ret_bytes = gib * GIB;
	*ret_node_expansion = !(cap->present && cap->block);
	return CSI_OK;
}

/* The external-resizer's --extra-modify-metadata keys: template properties of tag values, as
 * upstream's parseModifyVolumeParameters (matched exactly, as it does). */
static const char *const pv_keys[3] = {"csi.storage.k8s.io/pvc/name",
				       "csi.storage.k8s.io/pvc/namespace",
				       "csi.storage.k8s.io/pv/name"};

/* A tagSpecification value "key=value", the value a template of the PV's names (props): into
 * m, the key and value copied into keys. No --warn-on-invalid-tag here, as upstream. */
static enum csi_code modify_tag(const char *k, const char *v, const struct csi_tagtpl_props *tp,
				struct mod *m, char ***keys, struct csi_error *err)
{
	const char *eq = strchr(v, '=');
	_cleanup_free_ char *val = NULL;
	char msg[512];
	int r;

	if (!eq)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "%s: \"%s\" is not key=value", k,
				     v);
	if (m->n_tags >= MAX_MOD_TAGS)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "too many tags");
	_cleanup_free_ char *key = strndup(v, (size_t)(eq - v));
	if (!key || (r = csi_tagtpl_expand(k, eq + 1, tp, &val, msg, sizeof(msg))) == -ENOMEM)
		return csi_error_set(err, CSI_RESOURCE_EXHAUSTED, "out of memory");
	if (r < 0 || csi_tag_check(key, val, msg, sizeof(msg)) < 0)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "invalid tag: %s", msg);
	if (strv_push(keys, key) < 0 || strv_push(keys, val) < 0)
		return csi_error_set(err, CSI_RESOURCE_EXHAUSTED, "out of memory");
	size_t n = strv_len(*keys);
	m->tags[m->n_tags].key = (*keys)[n - 2];
	m->tags[m->n_tags].value = (*keys)[n - 1];
	m->n_tags++;
	return csi_error_ok(err);
}

/* One mutable parameter into m (a tag's key and value copied into keys). */
static enum csi_code modify_param(const char *k, const char *v, const struct csi_tagtpl_props *tp,
				  struct mod *m, char ***keys, struct csi_error *err)
{

	if (strcasecmp(k, "type") == 0) {
		const struct csi_vol_type *t = csi_vol_type_find(v);
		if (!t)
			return csi_error_set(err, CSI_INVALID_ARGUMENT,
					     "unknown volume type \"%s\"", v);
		str_copy(m->type, sizeof(m->type), t->name);
	} else if (strcasecmp(k, "iops") == 0) {
		if (str_to_ll(v, 1, 1LL << 30, &m->iops) < 0)
			return csi_error_set(err, CSI_INVALID_ARGUMENT, "could not parse iops (%s)",
					     v);
	} else if (strcasecmp(k, "throughput") == 0) {
		if (str_to_ll(v, 1, 1LL << 30, &m->tput) < 0)
			return csi_error_set(err, CSI_INVALID_ARGUMENT,
					     "could not parse throughput (%s)", v);
	} else if (strncasecmp(k, "tagSpecification", 16) == 0) {
		return modify_tag(k, v, tp, m, keys, err);
	} else if (strcmp(k, pv_keys[0]) != 0 && strcmp(k, pv_keys[1]) != 0 &&
		   strcmp(k, pv_keys[2]) != 0) {
		return csi_error_set(err, CSI_INVALID_ARGUMENT,
				     "invalid parameter key %s for ControllerModifyVolume", k);
	}
	return csi_error_ok(err);
}

enum csi_code csi_ctrl_modify(struct csi_ctrl *c, const struct csi_ctrl_call *call,
			      const char *volume_id, const struct csi_kv *params, size_t n,
			      struct csi_error *err)
{
	_cleanup_strv_ char **keys = NULL;
	struct mod m = {0};
	long long gib;

	if (!*volume_id)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "volume id is missing");
	if (!aws_volume_id_valid(volume_id))
		return ctrl_bad_id(err, "volume id", volume_id);
	/* nothing to change: done, without asking EC2 (as upstream; the spec modifies only for the
	 * keys given, so none is a valid no-op) */
	if (!n) {
		log_v(2, "nothing to modify", KV_S("volume", volume_id));
		return csi_error_ok(err);
	}
	const char *pv[3] = {NULL, NULL, NULL};
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < 3; j++)
			if (strcmp(params[i].key, pv_keys[j]) == 0)
				pv[j] = params[i].value;
	const struct csi_tagtpl_props tp = {CSI_TAGTPL_PV_TYPE, csi_tagtpl_pv_fields, pv, 3};
	for (size_t i = 0; i < n; i++)
		if (modify_param(params[i].key, params[i].value, &tp, &m, &keys, err) != CSI_OK)
			return err->code;
	return coalesce(c, call, volume_id, &m, &gib, err);
}
