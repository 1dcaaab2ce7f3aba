/* Instance descriptions, provider IDs, cluster tags and Node-to-instance matching. */
#include "modules/ccm/ccm_model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"

static void eni_release(struct ccm_eni *e)
{
	free(e->id);
	free(e->status);
	strv_free(e->private_ips);
	strv_free(e->ipv6s);
}

void ccm_instance_release(struct ccm_instance *i)
{
	if (!i)
		return;
	free(i->id);
	free(i->state);
	free(i->type);
	free(i->zone);
	free(i->private_dns);
	free(i->public_dns);
	free(i->private_ip);
	free(i->public_ip);
	free(i->vpc_id);
	free(i->subnet_id);
	for (size_t k = 0; k < i->n_enis; k++)
		eni_release(&i->enis[k]);
	free(i->enis);
	for (size_t k = 0; k < i->n_tags; k++) {
		free(i->tags[k].key);
		free(i->tags[k].value);
	}
	free(i->tags);
	*i = (struct ccm_instance){0};
}

void ccm_instance_free(struct ccm_instance *i)
{
	ccm_instance_release(i);
	free(i);
}

/* strdup of NULL is NULL; *ok cleared on an allocation failure */
static char *dup_opt(const char *s, bool *ok)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*ok = false;
	return d;
}

static char **strv_dup(char *const *v, bool *ok)
{
	char **out = NULL;
	if (!v)
		return NULL;
	for (size_t k = 0; v[k]; k++)
		if (strv_push(&out, v[k]) < 0) {
			*ok = false;
			return out;
		}
	if (!out && !(out = calloc(1, sizeof(char *))))
		*ok = false;
	return out;
}

int ccm_instance_copy(const struct ccm_instance *s, struct ccm_instance *ret)
{
	struct ccm_instance d = {0};
	bool ok = true;

	d.id = dup_opt(s->id, &ok);
	d.state = dup_opt(s->state, &ok);
	d.type = dup_opt(s->type, &ok);
	d.zone = dup_opt(s->zone, &ok);
	d.private_dns = dup_opt(s->private_dns, &ok);
	d.public_dns = dup_opt(s->public_dns, &ok);
	d.private_ip = dup_opt(s->private_ip, &ok);
	d.public_ip = dup_opt(s->public_ip, &ok);
	d.vpc_id = dup_opt(s->vpc_id, &ok);
	d.subnet_id = dup_opt(s->subnet_id, &ok);
	d.source_dest_check = s->source_dest_check;
	if (s->n_enis) {
		if (!(d.enis = calloc(s->n_enis, sizeof(*d.enis))))
			ok = false;
		else
			d.n_enis = s->n_enis;
		for (size_t k = 0; ok && k < s->n_enis; k++) {
			d.enis[k].id = dup_opt(s->enis[k].id, &ok);
			d.enis[k].status = dup_opt(s->enis[k].status, &ok);
			d.enis[k].device_index = s->enis[k].device_index;
			d.enis[k].source_dest_check = s->enis[k].source_dest_check;
			d.enis[k].private_ips = strv_dup(s->enis[k].private_ips, &ok);
			d.enis[k].ipv6s = strv_dup(s->enis[k].ipv6s, &ok);
		}
	}
	if (ok && s->n_tags) {
		if (!(d.tags = calloc(s->n_tags, sizeof(*d.tags))))
			ok = false;
		else
			d.n_tags = s->n_tags;
		for (size_t k = 0; ok && k < s->n_tags; k++) {
			d.tags[k].key = dup_opt(s->tags[k].key, &ok);
			d.tags[k].value = dup_opt(s->tags[k].value, &ok);
		}
	}
	if (!ok) {
		ccm_instance_release(&d);
		return -ENOMEM;
	}
	*ret = d;
	return 0;
}

/* The text at path, copied; NULL (and no error) when absent or empty. */
static int text_dup(const xmlNode *n, const char *path, char **dst)
{
	const char *t = aws_xml_text(n, path);
	if (!t || !*t)
		return 0;
	if (!(*dst = strdup(t)))
		return -ENOMEM;
	return 0;
}

static int eni_from_xml(const xmlNode *item, struct ccm_eni *e)
{
	long long idx;
	bool b;
	int r;

	e->device_index = -1;
	if ((r = text_dup(item, "networkInterfaceId", &e->id)) < 0 ||
	    (r = text_dup(item, "status", &e->status)) < 0)
		return r;
	if (aws_xml_int(item, "attachment/deviceIndex", &idx) == 0)
		e->device_index = idx;
	e->source_dest_check = aws_xml_bool(item, "sourceDestCheck", &b) == 0 ? b : true;
	size_t n = 0;
	for (xmlNode *a = aws_xml_list(item, "privateIpAddressesSet"); a; a = aws_xml_next(a)) {
		const char *ip = aws_xml_text(a, "privateIpAddress");
		if (!ip || !*ip)
			continue;
		if (++n > CCM_MAX_IPS_PER_ENI)
			return -E2BIG;
		if ((r = strv_push(&e->private_ips, ip)) < 0)
			return r;
	}
	n = 0;
	for (xmlNode *a = aws_xml_list(item, "ipv6AddressesSet"); a; a = aws_xml_next(a)) {
		const char *ip = aws_xml_text(a, "ipv6Address");
		if (!ip || !*ip)
			continue;
		if (++n > CCM_MAX_IPS_PER_ENI)
			return -E2BIG;
		if ((r = strv_push(&e->ipv6s, ip)) < 0)
			return r;
	}
	return 0;
}

int ccm_instance_from_xml(const xmlNode *item, struct ccm_instance *ret)
{
	struct ccm_instance i = {0};
	bool b;
	int r;

	const char *id = aws_xml_text(item, "instanceId");
	const char *state = aws_xml_text(item, "instanceState/name");
	if (!id || !*id)
		return -EBADMSG;
	/* no state is no evidence that the instance is gone: never read it as terminated */
	if (!state || !*state)
		return -EBADMSG;
	if ((r = text_dup(item, "instanceId", &i.id)) < 0 ||
	    (r = text_dup(item, "instanceState/name", &i.state)) < 0 ||
	    (r = text_dup(item, "instanceType", &i.type)) < 0 ||
	    (r = text_dup(item, "placement/availabilityZone", &i.zone)) < 0 ||
	    (r = text_dup(item, "privateDnsName", &i.private_dns)) < 0 ||
	    (r = text_dup(item, "dnsName", &i.public_dns)) < 0 ||
	    (r = text_dup(item, "privateIpAddress", &i.private_ip)) < 0 ||
	    (r = text_dup(item, "ipAddress", &i.public_ip)) < 0 ||
	    (r = text_dup(item, "vpcId", &i.vpc_id)) < 0 ||
	    (r = text_dup(item, "subnetId", &i.subnet_id)) < 0)
		goto fail;
	i.source_dest_check = aws_xml_bool(item, "sourceDestCheck", &b) == 0 ? b : true;

	size_t n = aws_xml_count(item, "networkInterfaceSet");
	if (n > CCM_MAX_ENIS) {
		r = -E2BIG;
		goto fail;
	}
	if (n && !(i.enis = calloc(n, sizeof(*i.enis)))) {
		r = -ENOMEM;
		goto fail;
	}
	for (xmlNode *e = aws_xml_list(item, "networkInterfaceSet"); e && i.n_enis < n;
	     e = aws_xml_next(e))
		if ((r = eni_from_xml(e, &i.enis[i.n_enis++])) < 0)
			goto fail;

	n = aws_xml_count(item, "tagSet");
	if (n > CCM_MAX_TAGS) {
		r = -E2BIG;
		goto fail;
	}
	if (n && !(i.tags = calloc(n, sizeof(*i.tags)))) {
		r = -ENOMEM;
		goto fail;
	}
	for (xmlNode *t = aws_xml_list(item, "tagSet"); t && i.n_tags < n; t = aws_xml_next(t)) {
		const char *k = aws_xml_text(t, "key"), *v = aws_xml_text(t, "value");
		if (!k)
			continue;
		struct ccm_tag *tag = &i.tags[i.n_tags++];
		if (!(tag->key = strdup(k)) || !(tag->value = strdup(v ? v : ""))) {
			r = -ENOMEM;
			goto fail;
		}
	}
	*ret = i;
	return 0;
fail:
	ccm_instance_release(&i);
	return r;
}

int ccm_instances_from_reply(const xmlNode *root, struct ccm_instance **list, size_t *n)
{
	int r;

	for (xmlNode *rs = aws_xml_list(root, "reservationSet"); rs; rs = aws_xml_next(rs))
		for (xmlNode *it = aws_xml_list(rs, "instancesSet"); it; it = aws_xml_next(it)) {
			struct ccm_instance *l = reallocarray(*list, *n + 1, sizeof(**list));
			if (!l)
				return -ENOMEM;
			*list = l;
			if ((r = ccm_instance_from_xml(it, &l[*n])) < 0)
				return r;
			(*n)++;
		}
	return 0;
}

const char *ccm_instance_tag(const struct ccm_instance *i, const char *key)
{
	for (size_t k = 0; k < i->n_tags; k++)
		if (strcmp(i->tags[k].key, key) == 0)
			return i->tags[k].value;
	return NULL;
}

/* Provider IDs ------------------------------------------------------------------------- */

static bool valid_instance_id(const char *s, size_t len)
{
	if (len < 3 || s[0] != 'i' || s[1] != '-')
		return false;
	return memchr(s, '/', len) == NULL;
}

int ccm_parse_provider_id(const char *pid, char *ret_id, size_t n)
{
	const char *path;

	if (!pid || !*pid)
		return -EINVAL;
	if (strstr(pid, "://") && !str_has_prefix(pid, "aws://"))
		return -ENOTSUP; /* static://, kind://, ... */
	if (str_has_prefix(pid, "aws://")) {
		/* url.Parse: aws://HOST/PATH; the host (the part up to the next '/') is ignored */
		const char *rest = pid + 6;
		path = strchr(rest, '/');
		if (!path)
			return -EINVAL;
	} else {
		path = pid;
	}
	if (strpbrk(path, "?#"))
		return -EINVAL;
	/* strings.Trim(path, "/") then split on '/' into one or two tokens */
	while (*path == '/')
		path++;
	size_t len = strlen(path);
	while (len && path[len - 1] == '/')
		len--;
	const char *slash = memchr(path, '/', len);
	const char *tok = path;
	size_t tl = len;
	if (slash) {
		if (memchr(slash + 1, '/', len - (size_t)(slash + 1 - path)))
			return -EINVAL; /* three tokens */
		tok = slash + 1;
		tl = len - (size_t)(tok - path);
	}
	if (tl >= 8 && strncmp(tok, "fargate-", 8) == 0)
		return -ENOTSUP;
	if (!valid_instance_id(tok, tl))
		return -EINVAL;
	if (tl >= n)
		return -ENAMETOOLONG;
	memcpy(ret_id, tok, tl);
	ret_id[tl] = 0;
	return 0;
}

int ccm_format_provider_id(const char *zone, const char *id, char *buf, size_t n)
{
	int r = str_printf(buf, n, "aws:///%s/%s", zone ? zone : "", id);
	return r < 0 ? r : 0;
}

int ccm_instance_id_from_node_name(const char *name, char *ret_id, size_t n)
{
	if (!str_has_prefix(name, "i-"))
		return -ENOENT;
	size_t len = strcspn(name, ".");
	if (!valid_instance_id(name, len))
		return -EINVAL;
	if (len >= n)
		return -ENAMETOOLONG;
	memcpy(ret_id, name, len);
	ret_id[len] = 0;
	return 0;
}

int ccm_node_lookup_id(const struct ccm_node_ref *node, char *ret_id, size_t n)
{
	if (node->provider_id && *node->provider_id)
		return ccm_parse_provider_id(node->provider_id, ret_id, n);
	int r = ccm_instance_id_from_node_name(node->name, ret_id, n);
	return r == -EINVAL ? -ENOENT : r;
}

/* Cluster tags ------------------------------------------------------------------------- */

int ccm_cluster_id_from_tags(const struct ccm_tag *tags, size_t n, const char **ret)
{
	const char *legacy = NULL, *cur = NULL;
	size_t pl = strlen(CCM_CLUSTER_TAG_PREFIX);

	for (size_t k = 0; k < n; k++) {
		if (strcmp(tags[k].key, CCM_CLUSTER_TAG_LEGACY) == 0)
			legacy = tags[k].value;
		else if (strncmp(tags[k].key, CCM_CLUSTER_TAG_PREFIX, pl) == 0) {
			const char *id = tags[k].key + pl;
			if (cur && strcmp(cur, id) != 0)
				return -ENOTUNIQ;
			cur = id;
		}
	}
	if (cur && legacy && *legacy && strcmp(cur, legacy) != 0)
		return -ENOTUNIQ;
	if (cur && *cur) {
		*ret = cur;
		return 0;
	}
	if (legacy && *legacy) {
		*ret = legacy;
		return 0;
	}
	return -ENOENT;
}

static bool is_cluster_key(const char *key, const char *cluster_id)
{
	size_t pl = strlen(CCM_CLUSTER_TAG_PREFIX);
	return strncmp(key, CCM_CLUSTER_TAG_PREFIX, pl) == 0 && strcmp(key + pl, cluster_id) == 0;
}

bool ccm_tags_have_cluster(const struct ccm_tag *tags, size_t n, const char *cluster_id)
{
	if (!cluster_id || !*cluster_id)
		return true;
	for (size_t k = 0; k < n; k++) {
		if (strcmp(tags[k].key, CCM_CLUSTER_TAG_LEGACY) == 0 &&
		    strcmp(tags[k].value, cluster_id) == 0)
			return true;
		if (is_cluster_key(tags[k].key, cluster_id))
			return true;
	}
	return false;
}

bool ccm_tags_cluster_owned(const struct ccm_tag *tags, size_t n, const char *cluster_id)
{
	if (!cluster_id || !*cluster_id)
		return false;
	for (size_t k = 0; k < n; k++) {
		if (strcmp(tags[k].key, CCM_CLUSTER_TAG_LEGACY) == 0 &&
		    strcmp(tags[k].value, cluster_id) == 0)
			return true;
		if (is_cluster_key(tags[k].key, cluster_id) && strcmp(tags[k].value, "owned") == 0)
			return true;
	}
	return false;
}

/* States ------------------------------------------------------------------------------- */

const char *const ccm_alive_states[5] = {"pending", "running", "shutting-down", "stopping",
					 "stopped"};

static bool is_alive(const struct ccm_instance *i)
{
	if (!i->state)
		return false;
	for (size_t k = 0; k < ARRAY_SIZE(ccm_alive_states); k++)
		if (strcmp(i->state, ccm_alive_states[k]) == 0)
			return true;
	return false;
}

bool ccm_instance_exists(const struct ccm_instance *i)
{
	return i && i->state && *i->state && strcmp(i->state, "terminated") != 0;
}

bool ccm_instance_shutdown(const struct ccm_instance *i)
{
	return i && i->state && strcmp(i->state, "stopped") == 0;
}

/* Matching ----------------------------------------------------------------------------- */

int ccm_match_instance(const struct ccm_node_ref *node, const struct ccm_instance *cands, size_t n,
		       const char *cluster_id, enum ccm_match_kind *ret_kind)
{
	char id[64];
	int r, found = -1;

	r = ccm_node_lookup_id(node, id, sizeof(id));
	if (r == 0) {
		for (size_t k = 0; k < n; k++)
			if (cands[k].id && strcmp(cands[k].id, id) == 0) {
				if (ret_kind)
					*ret_kind = CCM_MATCH_ID;
				return (int)k;
			}
		return -ENOENT;
	}
	if (r != -ENOENT)
		return r;

	/* by private DNS name, then by Name tag: alive, cluster-tagged, exactly one */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t k = 0; k < n; k++) {
			const struct ccm_instance *i = &cands[k];
			const char *v = pass == 0 ? i->private_dns : ccm_instance_tag(i, "Name");
			if (!v || strcmp(v, node->name) != 0 || !is_alive(i) ||
			    !ccm_tags_have_cluster(i->tags, i->n_tags, cluster_id))
				continue;
			if (found >= 0 && strcmp(cands[found].id, i->id) != 0)
				return -ENOTUNIQ;
			found = (int)k;
		}
		if (found >= 0) {
			if (ret_kind)
				*ret_kind = pass == 0 ? CCM_MATCH_PRIVATE_DNS : CCM_MATCH_NAME_TAG;
			return found;
		}
	}
	return -ENOENT;
}
