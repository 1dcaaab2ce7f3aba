/* Provider IDs, cluster tags and Node-to-instance matching (instances are parsed by
 * common/aws/ec2.c). */
#include "modules/ccm/ccm_model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"

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

int ccm_cluster_id_from_tags(const struct ec2_tag *tags, size_t n, const char **ret)
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

bool ccm_tags_have_cluster(const struct ec2_tag *tags, size_t n, const char *cluster_id)
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

bool ccm_tags_cluster_owned(const struct ec2_tag *tags, size_t n, const char *cluster_id)
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

static bool is_alive(const struct ec2_instance *i)
{
	if (!i->state)
		return false;
	for (size_t k = 0; k < ARRAY_SIZE(ccm_alive_states); k++)
		if (strcmp(i->state, ccm_alive_states[k]) == 0)
			return true;
	return false;
}

bool ccm_instance_exists(const struct ec2_instance *i)
{
	return i && i->state && *i->state && strcmp(i->state, "terminated") != 0;
}

bool ccm_instance_shutdown(const struct ec2_instance *i)
{
	return i && i->state && strcmp(i->state, "stopped") == 0;
}

/* Matching ----------------------------------------------------------------------------- */

int ccm_match_instance(const struct ccm_node_ref *node, const struct ec2_instance *cands, size_t n,
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
			const struct ec2_instance *i = &cands[k];
			const char *v = pass == 0 ? i->private_dns : ec2_instance_tag(i, "Name");
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
