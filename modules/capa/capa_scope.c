/* One reconcile's scope of the AWSCluster controller and the helpers every network step uses:
 * calls in the cluster's region with their error kept for the conditions, CAPA's tags, the
 * cluster's owned-tag filter, and the writes into the working copy's spec and status. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "modules/capa/capa_cluster.h"
#include "modules/capa/capa_net.h"

/* ---- helpers of the scope ---- */

void capa_owned_key(const struct capa_scope *s, char *buf, size_t n)
{
	snprintf(buf, n, CAPA_TAG_CLUSTER_PREFIX "%s", s->name);
}

int capa_scope_call(struct capa_scope *s, enum aws_service svc, const char *action,
		    const struct aws_query *q, struct aws_reply *rep)
{
	struct aws_error e = {0};
	int r = capa_call(s->x, svc, s->region, action, q, rep, &e);

	if (r < 0) {
		str_printf(s->err, sizeof(s->err), "%s: %s%s%s", action, e.code,
			   e.code[0] ? ": " : "", e.message);
		capa_strcpy(s->code, sizeof(s->code), e.code);
	}
	return r;
}

int capa_scope_ec2(struct capa_scope *s, const char *action, const struct aws_query *q,
		   struct aws_reply *rep)
{
	return capa_scope_call(s, AWS_SVC_EC2, action, q, rep);
}

const char *capa_vpc_id(const struct capa_scope *s)
{
	return json_str(s->obj, "spec.network.vpc.id");
}

cJSON *capa_scope_status(struct capa_scope *s)
{
	cJSON *obj = s->obj;
	cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status");
	if (!st || !cJSON_IsObject(st)) {
		cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
		st = cJSON_AddObjectToObject(obj, "status");
	}
	return st;
}

void capa_scope_condition(struct capa_scope *s, const char *type, bool ok, const char *reason)
{
	cJSON *st = capa_scope_status(s);
	if (st)
		capa_condition_set(st, type, ok ? "True" : "False", ok ? NULL : "Warning",
				   ok ? NULL : reason, ok ? NULL : s->err);
}

/* ---- helpers ---- */

int capa_net_tags(struct capa_scope *s, struct capa_tags *t, const char *role, const char *name)
{
	return capa_tags_build(t, json_find(s->obj, "spec.additionalTags"), s->name, role, name);
}

int capa_net_create(struct capa_scope *s, const char *action, struct aws_query *q,
		    const char *tag_type, struct capa_tags *t, struct aws_reply *rep)
{
	int r;

	if (tag_type && (r = capa_query_tagspec(q, 1, tag_type, t)) < 0) {
		str_printf(s->err, sizeof(s->err), "%s: cannot build the request", action);
		return r;
	}
	if (!controllers_may_act(&s->x->run))
		return -ECANCELED;
	return capa_scope_ec2(s, action, q, rep);
}

/* The filter tag-key=<owned key>. */
int capa_net_filter_owned(struct capa_scope *s, struct aws_query *q)
{
	char key[320];
	capa_owned_key(s, key, sizeof(key));
	return aws_query_add_filter(q, "tag-key", (const char *[]){key}, 1);
}

bool capa_net_owned(struct capa_scope *s, const xmlNode *item)
{
	char key[320];
	capa_owned_key(s, key, sizeof(key));
	for (const xmlNode *t = aws_xml_list(item, "tagSet"); t; t = aws_xml_next(t)) {
		const char *k = aws_xml_text(t, "key"), *v = aws_xml_text(t, "value");
		if (k && v && strcmp(k, key) == 0 && strcmp(v, "owned") == 0)
			return true;
	}
	return false;
}

cJSON *capa_scope_network(struct capa_scope *s)
{
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(s->obj, "spec");
	if (!spec)
		spec = cJSON_AddObjectToObject(s->obj, "spec");
	cJSON *net = spec ? cJSON_GetObjectItemCaseSensitive(spec, "network") : NULL;
	if (spec && !net)
		net = cJSON_AddObjectToObject(spec, "network");
	return net;
}

/* Sets a string in spec.network (a dotted path below it) and notes the spec changed. */
int capa_net_set(struct capa_scope *s, cJSON *where, const char *path, const char *v)
{
	const char *was = json_str(where, path);
	if (was && strcmp(was, v) == 0)
		return 0;
	s->spec_changed = true;
	return json_set_str(where, path, v);
}

