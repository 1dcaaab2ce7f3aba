/* The discoverer's Kubernetes side (disc_internal.h): the cluster's configuration, the
 * PersistentVolumes, and writes that happen only when something changed, retried with
 * upstream's backoff. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/base64.h"
#include "common/base/cancel.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/kube/rest.h"
#include "common/kube/yaml.h"
#include "modules/discoverer/disc_internal.h"

#define DISC_MAX_PVS 1000000

/* The YAML document under key of a Secret's data (base64), parsed; -ENOENT when the Secret or
 * the key is absent. */
static int secret_yaml(struct disc *d, const char *name, const char *key, cJSON **ret)
{
	cJSON *sec = NULL;
	struct kube_status st;
	char err[256];
	void *raw = NULL;
	size_t len;
	int r = kube_get(d->kc, KUBE_REF(&kube_secrets, DISC_NS, name), &sec, &st);
	if (r < 0)
		return r;
	const cJSON *data = cJSON_GetObjectItemCaseSensitive(sec, "data");
	const char *b64 = json_str_key(data, key);
	if (!b64) {
		cJSON_Delete(sec);
		return -ENOENT;
	}
	r = base64_decode(b64, strlen(b64), BASE64_STD, &raw, &len);
	cJSON_Delete(sec);
	if (r < 0)
		return r;
	r = kube_yaml_parse(raw, len, KUBE_YAML_TYPED, ret, err, sizeof(err));
	free(raw);
	if (r < 0)
		log_error("the cluster configuration is not valid YAML", KV_S("secret", name),
			  KV_S("key", key), KV_S("error", err));
	return r;
}

static int set_str(char **dst, const char *v)
{
	if (*dst && **dst)
		return 0; /* the flag wins */
	if (!v || !*v)
		return 0;
	char *c = strdup(v);
	if (!c)
		return -ENOMEM;
	free(*dst);
	*dst = c;
	return 0;
}

int disc_read_config(struct disc *d)
{
	struct disc_cfg *c = &d->cfg;
	cJSON *doc = NULL;
	int r;

	if (!c->cluster_uuid || !*c->cluster_uuid) {
		cJSON *cm = NULL;
		r = kube_get(d->kc, KUBE_REF(&kube_configmaps, DISC_NS, "d8-cluster-uuid"), &cm, NULL);
		if (r < 0 && r != -ENOENT)
			return r;
		r = set_str(&c->cluster_uuid, json_str(cm, "data.cluster-uuid"));
		cJSON_Delete(cm);
		if (r < 0)
			return r;
	}
	r = secret_yaml(d, "d8-cluster-configuration", "cluster-configuration.yaml", &doc);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0) {
		r = set_str(&c->prefix, json_str(doc, "cloud.prefix"));
		cJSON_Delete(doc);
		doc = NULL;
		if (r < 0)
			return r;
	}
	r = secret_yaml(d, "d8-provider-cluster-configuration",
			"cloud-provider-cluster-configuration.yaml", &doc);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0) {
		const cJSON *tags = cJSON_GetObjectItemCaseSensitive(doc, "tags");
		if ((r = set_str(&c->layout, json_str(doc, "layout"))) < 0 ||
		    (r = set_str(&c->ami, json_str(doc, "masterNodeGroup.instanceClass.ami"))) < 0) {
			cJSON_Delete(doc);
			return r;
		}
		if (!c->tags && cJSON_IsObject(tags))
			c->tags = cJSON_Duplicate(tags, true);
		cJSON_Delete(doc);
	}
	if ((r = set_str(&c->layout, "WithoutNAT")) < 0)
		return r;
	if (strcmp(c->layout, "WithoutNAT") != 0 && strcmp(c->layout, "WithNAT") != 0 &&
	    strcmp(c->layout, "Standard") != 0) {
		log_error("unknown layout", KV_S("layout", c->layout));
		return -EINVAL;
	}
	if (!c->cluster_uuid || !*c->cluster_uuid) {
		log_error("the cluster UUID is unknown: set --cluster-uuid or the ConfigMap "
			  "kube-system/d8-cluster-uuid");
		return -ENOENT;
	}
	if (!c->prefix || !*c->prefix) {
		log_error("the cluster prefix is unknown: set --cluster-prefix or cloud.prefix in the "
			  "Secret kube-system/d8-cluster-configuration");
		return -ENOENT;
	}
	char profile[300];
	snprintf(profile, sizeof(profile), "%s-node", c->prefix);
	return set_str(&c->node_profile, profile);
}

struct handles {
	char **h;
	size_t n, cap;
};

static int add_handle(struct handles *hs, const char *v)
{
	if (!v || !*v)
		return 0;
	const char *slash = strrchr(v, '/'); /* in-tree aws://zone/vol-... */
	if (slash)
		v = slash + 1;
	if (hs->n == hs->cap) {
		size_t cap = hs->cap ? hs->cap * 2 : 64;
		if (cap > DISC_MAX_PVS)
			return -E2BIG;
		char **g = realloc(hs->h, cap * sizeof(*g));
		if (!g)
			return -ENOMEM;
		hs->h = g;
		hs->cap = cap;
	}
	return (hs->h[hs->n] = strdup(v)) ? (hs->n++, 0) : -ENOMEM;
}

static int pv_item(void *ud, cJSON *pv)
{
	struct handles *hs = ud;
	int r = 0;
	const char *drv = json_str(pv, "spec.csi.driver");
	if (drv && strcmp(drv, "ebs.csi.aws.com") == 0)
		r = add_handle(hs, json_str(pv, "spec.csi.volumeHandle"));
	if (r == 0)
		r = add_handle(hs, json_str(pv, "spec.awsElasticBlockStore.volumeID"));
	cJSON_Delete(pv);
	return r;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int disc_pv_handles(struct disc *d, char ***ret, size_t *ret_n)
{
	struct handles hs = { 0 };
	struct kube_status st;
	int r = kube_list_each(d->kc, KUBE_REF(&kube_pvs, NULL, NULL), NULL, pv_item, &hs, NULL, &st);
	if (r < 0) {
		for (size_t i = 0; i < hs.n; i++)
			free(hs.h[i]);
		free(hs.h);
		log_error("listing PersistentVolumes failed", KV_S("message", st.message), KV_E(r));
		return r;
	}
	if (hs.n)
		qsort(hs.h, hs.n, sizeof(*hs.h), str_cmp);
	*ret = hs.h;
	*ret_n = hs.n;
	return 0;
}

/* One attempt: 1 written, 0 unchanged, < 0 failed. */
static int apply_once(struct disc *d, const struct kube_resource *res, const cJSON *obj,
		      const char *const *keys, bool skip_absent, struct kube_status *st)
{
	const char *name = json_str(obj, "metadata.name"), *ns = json_str(obj, "metadata.namespace");
	cJSON *cur = NULL;
	int r = kube_get(d->kc, KUBE_REF(res, ns, name), &cur, st);
	if (r == -ENOENT) {
		if (skip_absent)
			return 0;
		r = kube_create(d->kc, KUBE_REF(res, ns, NULL), obj, NULL, st);
		return r < 0 ? r : 1;
	}
	if (r < 0)
		return r;
	bool same = true;
	for (size_t i = 0; keys[i]; i++) {
		const cJSON *want = cJSON_GetObjectItemCaseSensitive(obj, keys[i]);
		const cJSON *have = cJSON_GetObjectItemCaseSensitive(cur, keys[i]);
		if (!want != !have || (want && !cJSON_Compare(want, have, true)))
			same = false;
	}
	if (same) {
		cJSON_Delete(cur);
		return 0;
	}
	for (size_t i = 0; keys[i]; i++) {
		const cJSON *want = cJSON_GetObjectItemCaseSensitive(obj, keys[i]);
		cJSON_DeleteItemFromObjectCaseSensitive(cur, keys[i]);
		cJSON *c = want ? cJSON_Duplicate(want, true) : NULL;
		if (want && (!c || !cJSON_AddItemToObject(cur, keys[i], c))) {
			cJSON_Delete(c);
			cJSON_Delete(cur);
			return -ENOMEM;
		}
	}
	r = kube_update(d->kc, KUBE_REF(res, ns, name), cur, NULL, st);
	cJSON_Delete(cur);
	return r < 0 ? r : 1;
}

int disc_apply(struct disc *d, const void *resv, const cJSON *obj, const char *const *keys,
	       bool skip_absent)
{
	const struct kube_resource *res = resv;
	int64_t delay = d->write_initial_ns;
	struct kube_status st;
	int r = -EINVAL;

	for (long long attempt = 1; attempt <= d->write_tries; attempt++) {
		memset(&st, 0, sizeof(st));
		r = apply_once(d, res, obj, keys, skip_absent, &st);
		if (r >= 0) {
			if (r == 1) {
				d->writes++;
				log_info("written", KV_S("kind", res->kind),
					 KV_S("name", json_str(obj, "metadata.name")));
			}
			return r;
		}
		if (r == -ECANCELED || attempt == d->write_tries)
			break;
		log_warn("write failed, retrying", KV_S("kind", res->kind),
			 KV_S("name", json_str(obj, "metadata.name")), KV_I("attempt", attempt),
			 KV_S("message", st.message), KV_E(r));
		if (cancel_wait(cancel_root(), delay))
			return -ECANCELED;
		delay = delay * 2 > d->write_max_ns ? d->write_max_ns : delay * 2;
	}
	d->write_failed = true;
	log_error("write failed", KV_S("kind", res->kind), KV_S("name", json_str(obj, "metadata.name")),
		  KV_I("tries", d->write_tries), KV_S("message", st.message), KV_E(r));
	return r;
}
