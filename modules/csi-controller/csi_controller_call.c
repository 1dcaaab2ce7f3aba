/* What the controller's calls share: the in-flight set, waits, AWS errors as CSI codes, ids
 * in messages, tags, the CSI view of EC2 items, and deletion. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/error.h"
#include "common/aws/ids.h"
#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/keylock.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/csi-controller/csi_controller_internal.h"

enum csi_code ctrl_lock(struct csi_ctrl *c, const char *key, struct csi_error *err,
			const char *what_fmt, ...)
{
	char what[600];
	va_list ap;
	int r = keylock_try(c->inflight, key);

	if (r == 0)
		return csi_error_ok(err);
	va_start(ap, what_fmt);
	vsnprintf(what, sizeof(what), what_fmt, ap);
	va_end(ap);
	if (r == -ENOSPC)
		return csi_error_set(err, CSI_ABORTED,
				     "too many operations in flight (%d): try %s again later",
				     CSI_CTRL_MAX_INFLIGHT, what);
	return csi_error_set(err, CSI_ABORTED, "an operation for %s is already in progress", what);
}

void ctrl_unlock(struct csi_ctrl *c, const char *key)
{
	keylock_release(c->inflight, key);
}

bool ctrl_sleep(const struct csi_ctrl_call *call, int64_t ns)
{
	int64_t deadline = call ? call->deadline_ns : INT64_MAX;
	struct cancel *ct = call ? call->cancel : NULL;

	if (deadline != INT64_MAX && ns > deadline - now_mono_ns() - 50 * NSEC_PER_MSEC)
		ns = deadline - now_mono_ns() - 50 * NSEC_PER_MSEC;
	if (ns < 0)
		ns = 0;
	/* a NULL token is never cancelled: then a plain sleep of ns */
	if (cancel_wait(ct, ns))
		return false;
	return now_mono_ns() < deadline;
}

enum csi_code ctrl_aws_fail(struct csi_error *err, int r, const struct aws_error *e,
			    const char *what, enum csi_code not_found, enum csi_code fallback)
{
	char msg[768];

	aws_error_str(e, msg, sizeof(msg));
	return csi_error_set(err, csi_code_from_errno(r, not_found, fallback), "%s: %s", what,
			     *msg ? msg : strerror(-r));
}

const char *ctrl_id_str(const char *id, char buf[CTRL_ID_STR_MAX])
{
	return aws_value_escape(id, buf, CTRL_ID_STR_MAX);
}

enum csi_code ctrl_bad_id(struct csi_error *err, const char *what, const char *id)
{
	char esc[CTRL_ID_STR_MAX];

	return csi_error_set(err, CSI_INVALID_ARGUMENT, "%s \"%s\" is malformed", what,
			     ctrl_id_str(id, esc));
}

int ctrl_tag_add(struct ctrl_tags *t, const char *key, const char *value)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->kv[i].key, key) == 0) {
			t->kv[i].value = value;
			return 0;
		}
	if (t->n >= CTRL_MAX_TAGS)
		return -E2BIG;
	t->kv[t->n].key = key;
	t->kv[t->n].value = value;
	t->n++;
	return 0;
}

int ctrl_tags_add_extra(const struct csi_ctrl *c, struct ctrl_tags *t)
{
	int r = 0;

	for (size_t i = 0; i < c->n_extra_tags && r == 0; i++)
		r = ctrl_tag_add(t, c->extra_tags[i].key, c->extra_tags[i].value);
	return r;
}

int ctrl_tags_add_cluster(const struct csi_ctrl *c, struct ctrl_tags *t, const char *name,
			  char *name_tag, size_t name_len)
{
	int r;

	if (!c->cluster_id)
		return 0;
	snprintf(t->cluster_key, sizeof(t->cluster_key), "kubernetes.io/cluster/%s", c->cluster_id);
	snprintf(name_tag, name_len, "%s-dynamic-%s", c->cluster_id, name);
	if ((r = ctrl_tag_add(t, t->cluster_key, "owned")) == 0)
		r = ctrl_tag_add(t, "Name", name_tag);
	if (r == 0 && !t->no_kubernetes_cluster)
		r = ctrl_tag_add(t, "KubernetesCluster", c->cluster_id);
	return r;
}

void csi_ctrl_volume_release(struct csi_ctrl_volume *v)
{
	if (!v)
		return;
	csi_kv_free(v->ctx, v->n_ctx);
	strv_free(v->published);
	*v = (struct csi_ctrl_volume){0};
}

int ctrl_volume_of(const struct ec2_volume *v, const struct csi_kv *ctx, size_t n_ctx,
		   bool with_published, struct csi_ctrl_volume *ret)
{
	struct csi_ctrl_volume out = {0};
	int r = 0;

	str_copy(out.id, sizeof(out.id), v->id);
	str_copy(out.zone, sizeof(out.zone), v->az);
	out.capacity_bytes = v->size_gib * GIB;
	for (size_t i = 0; i < n_ctx && r == 0; i++)
		r = csi_kv_set(&out.ctx, &out.n_ctx, n_ctx, ctx[i].key, ctx[i].value);
	for (size_t i = 0; with_published && i < v->n_att && r == 0; i++)
		if (strcmp(v->att[i].state, "attached") == 0 ||
		    strcmp(v->att[i].state, "attaching") == 0)
			r = strv_push(&out.published, v->att[i].instance);
	if (r < 0) {
		csi_ctrl_volume_release(&out);
		return -ENOMEM;
	}
	*ret = out;
	return 0;
}

void ctrl_snapshot_of(const struct ec2_snapshot *s, struct csi_ctrl_snapshot *ret)
{
	*ret = (struct csi_ctrl_snapshot){0};
	str_copy(ret->id, sizeof(ret->id), s->id);
	str_copy(ret->source_volume, sizeof(ret->source_volume), s->volume);
	ret->size_bytes = s->size_gib * GIB;
	ret->created_ns = s->start_ns ? s->start_ns : now_real_ns();
	ret->ready = strcmp(s->state, "completed") == 0;
}

enum csi_code ctrl_delete(struct csi_ctrl *c, const struct ctrl_deletion *d, const char *id,
			  struct csi_error *err)
{
	struct aws_error aerr = {0};
	char key[64], what[32], msg[64], esc[CTRL_ID_STR_MAX];
	int r;

	if (!*id)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "%s id is missing", d->kind);
	if (!d->id_valid(id)) { /* no such object can exist */
		snprintf(msg, sizeof(msg), "malformed %s id: nothing to delete", d->kind);
		log_v(2, msg, KV_S(d->kind, ctrl_id_str(id, esc)));
		return csi_error_ok(err);
	}
	snprintf(key, sizeof(key), "%s%s", d->key_prefix, id);
	if (ctrl_lock(c, key, err, "%s %s", d->kind, id) != CSI_OK)
		return err->code;
	snprintf(what, sizeof(what), "deleting the %s", d->kind);
	r = d->remove(c, id, &aerr);
	if (r == -ENOENT) {
		snprintf(msg, sizeof(msg), "%s already deleted", d->kind);
		log_v(2, msg, KV_S(d->kind, id));
	} else if (r == -EBUSY || (d->in_use_code && aws_error_is(&aerr, d->in_use_code))) {
		ctrl_aws_fail(err, r, &aerr, what, CSI_FAILED_PRECONDITION,
			      CSI_FAILED_PRECONDITION);
	} else if (r < 0) {
		ctrl_aws_fail(err, r, &aerr, what, CSI_INTERNAL, CSI_INTERNAL);
	} else {
		snprintf(msg, sizeof(msg), "%s deleted", d->kind);
		log_info(msg, KV_S(d->kind, id));
	}
	if (r == 0 || r == -ENOENT)
		csi_error_ok(err);
	ctrl_unlock(c, key);
	return err->code;
}
