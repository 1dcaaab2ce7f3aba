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
	int code;
	char message[512];
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

static int mod_fail(struct pending *p, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int mod_fail(struct pending *p, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->message, sizeof(p->message), fmt, ap);
	va_end(ap);
	p->code = code;
	return code;
}

static int aws_fail(struct pending *p, int r, const struct aws_error *e, const char *what,
		    int fallback)
{
	char msg[512];
	int code = fallback;

	if (r == -ENOENT)
		code = RPC_NOT_FOUND;
	else if (r == -EAGAIN || r == -ETIMEDOUT || r == -ECONNREFUSED)
		code = RPC_UNAVAILABLE;
	else if (aws_error_is(e, "VolumeModificationRateExceeded") ||
		 aws_error_is(e, "IncorrectModificationState"))
		code = RPC_RESOURCE_EXHAUSTED;
	else if (str_has_prefix(e->code, "InvalidParameter"))
		code = RPC_INVALID_ARGUMENT;
	return mod_fail(p, code, "%s: %s", what, aws_error_str(e, msg, sizeof(msg)));
}

/* Runs the merged modification (no lock held). */
static void execute(struct rpc_call *call, struct csi_ctrl *c, struct pending *p)
{
	struct ec2_volume v = {0};
	struct ec2_modification cur;
	struct aws_error err = {0};
	char msg[256];
	int r;

	if ((r = ec2_describe_volume(c, p->volume, &v, &err)) < 0) {
		aws_fail(p, r, &err, "looking up the volume", RPC_INTERNAL);
		return;
	}
	const char *type = *p->m.type ? p->m.type : v.type;
	const struct csi_vol_type *t = csi_vol_type_find(type);
	long long gib = p->m.size_gib > v.size_gib ? p->m.size_gib : 0;
	bool type_change = *p->m.type && strcasecmp(p->m.type, v.type) != 0;
	long long iops = p->m.iops && p->m.iops != v.iops ? p->m.iops : 0;
	long long tput = p->m.tput && p->m.tput != v.throughput ? p->m.tput : 0;
	p->final_gib = gib ? gib : v.size_gib;
	if (!t) {
		mod_fail(p, RPC_INVALID_ARGUMENT, "unknown volume type %s", type);
		goto out;
	}
	long long size = gib ? gib : v.size_gib;
	if (gib && (size < t->min_gib || size > t->max_gib)) {
		mod_fail(p, RPC_OUT_OF_RANGE, "%s volumes must be %lld to %lld GiB, not %lld",
			 t->name, t->min_gib, t->max_gib, size);
		goto out;
	}
	if (iops) {
		struct csi_vol_params vp = {.iops_set = true, .iops = iops};
		long long got;
		if (csi_iops_resolve(t, &vp, size, &got, msg, sizeof(msg)) < 0) {
			mod_fail(p, RPC_INVALID_ARGUMENT, "%s", msg);
			goto out;
		}
		iops = got;
	} else if (type_change && t->iops_required && !v.iops) {
		mod_fail(p, RPC_INVALID_ARGUMENT, "changing to %s needs iops", t->name);
		goto out;
	}
	if (tput && csi_throughput_check(t, tput, iops ? iops : v.iops, msg, sizeof(msg)) < 0) {
		mod_fail(p, RPC_INVALID_ARGUMENT, "%s", msg);
		goto out;
	}
	if (p->m.n_tags && (r = ec2_create_tags(c, p->volume, p->m.tags, p->m.n_tags, &err)) < 0) {
		aws_fail(p, r, &err, "tagging the volume", RPC_INTERNAL);
		goto out;
	}
	if (!gib && !type_change && !iops && !tput) {
		p->code = RPC_OK;
		goto out;
	}
	/* A modification to the same target may be running already (a retried call). */
	aws_error_clear(&err);
	r = ec2_describe_modification(c, p->volume, &cur, &err);
	bool running =
	    r == 0 && (strcmp(cur.state, "modifying") == 0 || strcmp(cur.state, "optimizing") == 0);
	bool same = running && (!gib || cur.target_size == gib) &&
		    (!type_change || strcasecmp(cur.target_type, type) == 0) &&
		    (!iops || cur.target_iops == iops) && (!tput || cur.target_throughput == tput);
	if (running && !same) {
		mod_fail(p, RPC_ABORTED,
			 "volume %s is being modified already (to %lld GiB %s); try again later",
			 p->volume, cur.target_size, cur.target_type);
		goto out;
	}
	if (!running) {
		aws_error_clear(&err);
		if ((r = ec2_modify_volume(c, p->volume, gib, type_change ? t->name : NULL, iops,
					   tput, &err)) < 0) {
			aws_fail(p, r, &err, "modifying the volume", RPC_INTERNAL);
			goto out;
		}
		log_info("volume modification started", KV_S("volume", p->volume), KV_I("gib", gib),
			 KV_S("type", type_change ? t->name : ""), KV_I("iops", iops),
			 KV_I("throughput", tput));
	}
	/* optimizing: the new size is usable (the file system can grow) */
	for (int64_t delay = 500 * NSEC_PER_MSEC;;) {
		aws_error_clear(&err);
		r = ec2_describe_modification(c, p->volume, &cur, &err);
		if (r < 0 && r != -ENOENT) {
			aws_fail(p, r, &err, "describing the modification", RPC_INTERNAL);
			break;
		}
		if (r == 0 &&
		    (strcmp(cur.state, "optimizing") == 0 || strcmp(cur.state, "completed") == 0)) {
			p->code = RPC_OK;
			break;
		}
		if (r == 0 && strcmp(cur.state, "failed") == 0) {
			mod_fail(p, RPC_INTERNAL, "the modification of %s failed: %s", p->volume,
				 cur.message);
			break;
		}
		if (!ctrl_sleep(call, delay / c->poll_scale)) {
			mod_fail(p, RPC_DEADLINE_EXCEEDED, "volume %s is still being modified",
				 p->volume);
			break;
		}
		delay = delay * 2 > 5 * NSEC_PER_SEC ? 5 * NSEC_PER_SEC : delay * 2;
	}
out:
	ec2_volume_release(&v);
}

/* Queues m for the volume and returns the result of the merged call (the code, set on the
 * call when not OK), with the resulting size. */
static int coalesce(struct rpc_call *call, struct csi_ctrl *c, const char *volume,
		    const struct mod *m, long long *ret_gib)
{
	struct coalescer *co = c->coalescer;
	struct pending *p;
	const char *conflict;
	bool owner = false;
	int code;

	pthread_mutex_lock(&co->lock);
	for (p = co->list; p; p = p->next)
		if (strcmp(p->volume, volume) == 0 && !p->running)
			break;
	if (p) {
		if ((conflict = merge(&p->m, m))) {
			pthread_mutex_unlock(&co->lock);
			return rpc_call_error(call, RPC_ABORTED,
					      "a modification of %s with another %s is pending",
					      volume, conflict);
		}
	} else {
		if (!(p = calloc(1, sizeof(*p)))) {
			pthread_mutex_unlock(&co->lock);
			return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
		}
		str_copy(p->volume, sizeof(p->volume), volume);
		pthread_cond_init(&p->cond, NULL);
		merge(&p->m, m);
		p->next = co->list;
		co->list = p;
		owner = true;
	}
	p->users++;
	pthread_mutex_unlock(&co->lock);

	if (owner) {
		bool ok = ctrl_sleep(call, c->modify_window_ns);
		pthread_mutex_lock(&co->lock);
		p->running = true;
		pthread_mutex_unlock(&co->lock);
		if (!ok)
			mod_fail(p, RPC_ABORTED, "stopping");
		else
			execute(call, c, p);
		pthread_mutex_lock(&co->lock);
		p->done = true;
		pthread_cond_broadcast(&p->cond);
	} else {
		pthread_mutex_lock(&co->lock);
		while (!p->done)
			pthread_cond_wait(&p->cond, &co->lock);
	}
	code = p->code;
	if (code != RPC_OK)
		rpc_call_error(call, code, "%s", p->message);
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
	return code;
}

int csi_ctrl_expand(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ControllerExpandVolumeRequest *req = (const void *)in;
	struct csi_ctrl *c = rpc_call_userdata(call);
	struct mod m = {0};
	long long gib = 0;
	int code;

	if (!*req->volume_id)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "volume id is missing");
	if (!aws_volume_id_valid(req->volume_id))
		return ctrl_bad_id(call, "volume id", req->volume_id);
	if (!req->capacity_range)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "capacity range is missing");
	long long required = req->capacity_range->required_bytes,
		  limit = req->capacity_range->limit_bytes;
	if (required < 0 || limit < 0 || (limit && required > limit))
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "invalid capacity range");
	if (required == 0)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "required_bytes is missing");
	m.size_gib = required / GIB + (required % GIB != 0);
	if (limit && m.size_gib * GIB > limit)
		return rpc_call_error(call, RPC_OUT_OF_RANGE,
				      "%lld bytes rounded up to %lld GiB exceed limit_bytes %lld",
				      required, m.size_gib, limit);
	if ((code = coalesce(call, c, req->volume_id, &m, &gib)) != RPC_OK)
		return code;
	Csi__V1__ControllerExpandVolumeResponse *rep =
	    rpc_call_new(call, &csi__v1__controller_expand_volume_response__descriptor);
	if (!rep)
		return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
	rep->capacity_bytes = gib * GIB;
	rep->node_expansion_required = !(req->volume_capability && req->volume_capability->access_type_case ==
						 CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK);
	*out = &rep->base;
	return RPC_OK;
}

int csi_ctrl_modify(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__ControllerModifyVolumeRequest *req = (const void *)in;
	struct csi_ctrl *c = rpc_call_userdata(call);
	struct mod m = {0};
	long long gib;
	char err[256];
	int code = RPC_OK;

	if (!*req->volume_id)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "volume id is missing");
	if (!aws_volume_id_valid(req->volume_id))
		return ctrl_bad_id(call, "volume id", req->volume_id);
	if (!req->n_mutable_parameters)
		return rpc_call_error(call, RPC_INVALID_ARGUMENT, "mutable parameters are missing");
	for (size_t i = 0; i < req->n_mutable_parameters && code == RPC_OK; i++) {
		const char *k = req->mutable_parameters[i]->key,
			   *v = req->mutable_parameters[i]->value;
		if (strcasecmp(k, "type") == 0) {
			const struct csi_vol_type *t = csi_vol_type_find(v);
			if (!t)
				code = rpc_call_error(call, RPC_INVALID_ARGUMENT,
						      "unknown volume type \"%s\"", v);
			else
				str_copy(m.type, sizeof(m.type), t->name);
		} else if (strcasecmp(k, "iops") == 0) {
			if (str_to_ll(v, 1, 1LL << 30, &m.iops) < 0)
				code = rpc_call_error(call, RPC_INVALID_ARGUMENT,
						      "could not parse iops (%s)", v);
		} else if (strcasecmp(k, "throughput") == 0) {
			if (str_to_ll(v, 1, 1LL << 30, &m.tput) < 0)
				code = rpc_call_error(call, RPC_INVALID_ARGUMENT,
						      "could not parse throughput (%s)", v);
		} else if (strncasecmp(k, "tagSpecification", 16) == 0) {
			const char *eq = strchr(v, '=');
			if (!eq || strstr(v, "{{"))
				code = rpc_call_error(call, RPC_INVALID_ARGUMENT,
						      "%s: \"%s\" is not key=value", k, v);
			else if (m.n_tags >= MAX_MOD_TAGS)
				code = rpc_call_error(call, RPC_INVALID_ARGUMENT, "too many tags");
			else {
				char *key = rpc_call_printf(call, "%.*s", (int)(eq - v), v);
				if (!key)
					return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED,
							      "out of memory");
				if (csi_tag_check(key, eq + 1, err, sizeof(err)) < 0)
					code =
					    rpc_call_error(call, RPC_INVALID_ARGUMENT, "%s", err);
				m.tags[m.n_tags].key = key;
				m.tags[m.n_tags].value = (char *)eq + 1;
				m.n_tags++;
			}
		} else {
			code = rpc_call_error(call, RPC_INVALID_ARGUMENT,
					      "invalid parameter key %s for ControllerModifyVolume",
					      k);
		}
	}
	if (code != RPC_OK)
		return code;
	return coalesce(call, c, req->volume_id, &m, &gib);
}
