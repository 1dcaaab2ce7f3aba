/* The ccm's AWS side (see ccm_cloud.h). */
#include "modules/ccm/ccm_cloud.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/batch.h"
#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/kmap.h"

#define ZONE_REFRESH_NS (10 * 60 * NSEC_PER_SEC)

struct ccm_cloud {
	struct aws_client *aws;
	struct aws_batcher *batch;
	char **route_table_ids; /* [Global] RouteTableID, split */

	pthread_mutex_t zlock;
	struct kmap zones; /* zone name -> zone id (malloc'd) */
	int64_t zones_at;  /* last DescribeAvailabilityZones (monotonic) */
};

struct aws_client *ccm_cloud_client(struct ccm_cloud *c)
{
	return c->aws;
}

const char *ccm_cloud_region(struct ccm_cloud *c)
{
	const char *r = NULL;
	if (aws_client_region(c->aws, &r) < 0 || !r)
		return "";
	return r;
}

void ccm_cloud_free(struct ccm_cloud *c)
{
	if (!c)
		return;
	aws_batcher_free(c->batch);
	aws_client_free(c->aws);
	strv_free(c->route_table_ids);
	kmap_clear(&c->zones, free);
	pthread_mutex_destroy(&c->zlock);
	free(c);
}

int ccm_cloud_new(const struct ccm_cloud_opts *o, struct ccm_cloud **ret, char *err, size_t errlen)
{
	const struct ccm_config *cfg = o->cfg;
	_cleanup_free_ char *imds_url = NULL;
	struct ccm_cloud *c;
	const char *region;
	int r;

	if (!(c = calloc(1, sizeof(*c))))
		return -ENOMEM;
	pthread_mutex_init(&c->zlock, NULL);
	/* an [ServiceOverride] for ec2imds (any region) moves the metadata service */
	if ((r = ccm_config_apply_overrides(cfg, NULL, NULL, &imds_url)) < 0)
		goto fail;
	struct aws_client_opts ao = {
	    .region = cfg->region,
	    .user_agent = "ccm",
	    .creds = {.role_arn = cfg->role_arn, .source_arn = cfg->source_arn},
	    .imds = {.endpoint = imds_url},
	};
	if ((r = aws_client_new(&ao, &c->aws)) < 0) {
		snprintf(err, errlen, "cannot create the AWS client: %s", strerror(-r));
		goto fail;
	}
	if ((r = aws_client_region(c->aws, &region)) < 0) {
		snprintf(err, errlen,
			 "the AWS region is unknown: set [Global] Region in the cloud config or "
			 "AWS_REGION, or run where the instance metadata service answers (%s)",
			 strerror(-r));
		goto fail;
	}
	for (size_t i = 0; i < cfg->n_overrides; i++) {
		const struct ccm_service_override *ov = &cfg->overrides[i];
		enum aws_service svc[2];
		bool imds = false;
		int n = ccm_override_services(ov->service, svc, &imds);
		if (strcmp(ov->region, region) != 0)
			continue;
		if (n == 0 && !imds)
			log_v(2,
			      "ignoring a service override for a service this binary does not call",
			      KV_S("service", ov->service));
		for (int j = 0; j < n; j++)
			if ((r = aws_client_set_override(
				 c->aws, svc[j], ov->url, ov->signing_region,
				 ov->signing_name && *ov->signing_name ? ov->signing_name : NULL)) <
			    0) {
				snprintf(err, errlen, "[ServiceOverride \"%s\"]: %s", ov->name,
					 strerror(-r));
				goto fail;
			}
	}
	if (cfg->route_table_id && *cfg->route_table_id &&
	    (r = strv_split(cfg->route_table_id, ',', &c->route_table_ids)) < 0)
		goto fail;
	struct aws_batcher_opts bo = {.window_ns = o->batch_window_ns};
	if ((r = aws_batcher_new(c->aws, &aws_batch_instances, &bo, &c->batch)) < 0)
		goto fail;
	*ret = c;
	return 0;
fail:
	ccm_cloud_free(c);
	return r;
}

void ccm_instances_free(struct ec2_instance *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ec2_instance_release(&list[i]);
	free(list);
}

/* Instances ---------------------------------------------------------------------------- */

struct collect {
	struct ec2_instance **list;
	size_t *n;
};

static int collect_page(void *ud, const struct aws_reply *page)
{
	struct collect *cl = ud;
	return ec2_instances_parse(page->root, cl->list, cl->n);
}

/* One filtered DescribeInstances (all pages). */
static int describe_filtered(struct ccm_cloud *c, const char *filter, const char *const *vals,
			     size_t n, bool alive_only, struct ec2_instance **list, size_t *list_n,
			     struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct collect cl = {list, list_n};
	struct aws_paginate p = {.token_param = "NextToken",
				 .reply_field = "nextToken",
				 .on_page = collect_page,
				 .ud = &cl};
	int r;

	if ((r = aws_query_add_filter(&q, filter, vals, n)) >= 0 && alive_only)
		r = aws_query_add_filter(&q, "instance-state-name", ccm_alive_states,
					 ARRAY_SIZE(ccm_alive_states));
	if (r >= 0)
		r = aws_paginate_query(c->aws, AWS_SVC_EC2, "DescribeInstances", &q, &p, err);
	aws_query_release(&q);
	return r;
}

int ccm_cloud_describe_ids(struct ccm_cloud *c, const char *const *ids, size_t n,
			   struct ec2_instance **list, size_t *list_n, struct aws_error *err)
{
	int r;

	if (n == 0)
		return 0;
	if (n == 1) {
		xmlDoc *doc = NULL;
		struct ec2_instance i;
		r = aws_batcher_get(c->batch, ids[0], &doc, err);
		if (r == -ENOENT)
			return 0;
		if (r < 0)
			return r;
		r = ec2_instance_parse(xmlDocGetRootElement(doc), &i);
		xmlFreeDoc(doc);
		if (r < 0)
			return r;
		struct ec2_instance *l = reallocarray(*list, *list_n + 1, sizeof(**list));
		if (!l) {
			ec2_instance_release(&i);
			return -ENOMEM;
		}
		*list = l;
		l[(*list_n)++] = i;
		return 0;
	}
	for (size_t off = 0; off < n; off += CCM_DESCRIBE_CHUNK) {
		size_t k = n - off < CCM_DESCRIBE_CHUNK ? n - off : CCM_DESCRIBE_CHUNK;
		if ((r = describe_filtered(c, "instance-id", ids + off, k, false, list, list_n,
					   err)) < 0)
			return r;
	}
	return 0;
}

/* describe_filtered over any number of values, CCM_DESCRIBE_CHUNK per call */
static int describe_chunked(struct ccm_cloud *c, const char *filter, const char *const *vals,
			    size_t n, struct ec2_instance **list, size_t *list_n,
			    struct aws_error *err)
{
	int r;
	for (size_t off = 0; off < n; off += CCM_DESCRIBE_CHUNK) {
		size_t k = n - off < CCM_DESCRIBE_CHUNK ? n - off : CCM_DESCRIBE_CHUNK;
		if ((r = describe_filtered(c, filter, vals + off, k, true, list, list_n, err)) < 0)
			return r;
	}
	return 0;
}

int ccm_cloud_find_by_names(struct ccm_cloud *c, const char *const *names, size_t n,
			    struct ec2_instance **list, size_t *list_n, struct aws_error *err)
{
	_cleanup_free_ const char **dns = NULL, **tag = NULL;
	size_t n_dns = 0, n_tag = 0, before = *list_n;
	int r;

	if (n == 0)
		return 0;
	if (!(dns = calloc(n, sizeof(*dns))) || !(tag = calloc(n, sizeof(*tag))))
		return -ENOMEM;
	/* a private DNS name is fully qualified: a name without a dot can only be a Name tag */
	for (size_t i = 0; i < n; i++)
		if (strchr(names[i], '.'))
			dns[n_dns++] = names[i];
		else
			tag[n_tag++] = names[i];
	if ((r = describe_chunked(c, "private-dns-name", dns, n_dns, list, list_n, err)) < 0)
		return r;
	/* Deckhouse's fallback: the Name tag, for the names no private DNS name matched */
	for (size_t i = 0; i < n_dns; i++) {
		bool hit = false;
		for (size_t j = before; j < *list_n && !hit; j++)
			hit = (*list)[j].private_dns && strcmp((*list)[j].private_dns, dns[i]) == 0;
		if (!hit)
			tag[n_tag++] = dns[i];
	}
	return describe_chunked(c, "tag:Name", tag, n_tag, list, list_n, err);
}

int ccm_cloud_cluster_id(struct ccm_cloud *c, const char *configured, char **ret, char *err,
			 size_t errlen)
{
	_cleanup_free_ char *self = NULL;
	struct ec2_instance *l = NULL;
	size_t n = 0;
	struct aws_error ae = {0};
	const char *id;
	int r;

	if (configured && *configured) {
		*ret = strdup(configured);
		return *ret ? 0 : -ENOMEM;
	}
	if ((r = aws_imds_instance_id(aws_client_imds(c->aws), &self)) < 0) {
		snprintf(err, errlen,
			 "no cluster ID in the cloud config (KubernetesClusterID) and the instance "
			 "metadata service does not answer (%s)",
			 strerror(-r));
		return r;
	}
	if ((r = ccm_cloud_describe_ids(c, (const char *const[]){self}, 1, &l, &n, &ae)) < 0) {
		snprintf(err, errlen, "describing this instance %s: %s", self, ae.message);
		return r;
	}
	if (n == 0) {
		snprintf(err, errlen, "this instance %s is unknown to EC2", self);
		return -ENOENT;
	}
	r = ccm_cluster_id_from_tags(l[0].tags, l[0].n_tags, &id);
	if (r == -ENOENT)
		snprintf(err, errlen,
			 "no cluster ID in the cloud config and instance %s carries no cluster tag "
			 "(kubernetes.io/cluster/<id> or KubernetesCluster)",
			 self);
	else if (r == -ENOTUNIQ)
		snprintf(err, errlen, "instance %s carries several different cluster tags", self);
	else if (!(*ret = strdup(id)))
		r = -ENOMEM;
	ccm_instances_free(l, n);
	return r;
}

/* Zones -------------------------------------------------------------------------------- */

static int zones_refresh(struct ccm_cloud *c)
{
	struct aws_reply rep = {0};
	struct aws_error e = {0};
	struct aws_query q = AWS_QUERY_INIT;
	int r = aws_call_query(c->aws, AWS_SVC_EC2, "DescribeAvailabilityZones", &q, &rep, &e);
	aws_query_release(&q);
	if (r < 0) {
		log_v(3, "DescribeAvailabilityZones failed", KV_S("error", e.message), KV_E(r));
		return r;
	}
	for (xmlNode *z = aws_xml_list(rep.root, "availabilityZoneInfo"); z; z = aws_xml_next(z)) {
		const char *name = aws_xml_text(z, "zoneName"), *id = aws_xml_text(z, "zoneId");
		if (!name || !id || !*id)
			continue;
		char *v = strdup(id), *old = NULL;
		if (!v || kmap_put(&c->zones, name, v, (void **)&old) < 0) {
			free(v);
			r = -ENOMEM;
			break;
		}
		free(old);
	}
	aws_reply_release(&rep);
	return r;
}

int ccm_cloud_zone_id(struct ccm_cloud *c, const char *zone, char *buf, size_t n)
{
	int r = -ENOENT;

	if (!zone || !*zone)
		return -ENOENT;
	pthread_mutex_lock(&c->zlock);
	const char *id = kmap_get(&c->zones, zone);
	if (!id && (c->zones_at == 0 || now_mono_ns() - c->zones_at > ZONE_REFRESH_NS)) {
		int e = zones_refresh(c);
		if (e >= 0)
			c->zones_at = now_mono_ns();
		else
			r = e; /* not remembered: asked again next time */
		id = kmap_get(&c->zones, zone);
	}
	if (id)
		r = str_copy(buf, n, id);
	pthread_mutex_unlock(&c->zlock);
	return r;
}

/* Routes ------------------------------------------------------------------------------- */

struct rt_collect {
	struct ccm_route_table **list;
	size_t *n;
};

static int rt_page(void *ud, const struct aws_reply *page)
{
	struct rt_collect *cl = ud;
	return ccm_route_tables_from_reply(page->root, cl->list, cl->n);
}

int ccm_cloud_route_tables(struct ccm_cloud *c, const char *cluster_id,
			   struct ccm_route_table **ret, size_t *ret_n, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct ccm_route_table *list = NULL;
	size_t n = 0;
	struct rt_collect cl = {&list, &n};
	struct aws_paginate p = {
	    .token_param = "NextToken", .reply_field = "nextToken", .on_page = rt_page, .ud = &cl};
	char key[300];
	int r;

	if (c->route_table_ids)
		r = aws_query_add_list(&q, "RouteTableId", (const char *const *)c->route_table_ids,
				       strv_len(c->route_table_ids));
	else if (!cluster_id || !*cluster_id)
		r = -EINVAL; /* upstream refuses to guess the table of an untagged cluster */
	else if ((r = str_printf(key, sizeof(key), "%s%s", CCM_CLUSTER_TAG_PREFIX, cluster_id)) >=
		 0)
		r = aws_query_add_filter(&q, "tag-key",
					 (const char *const[]){key, CCM_CLUSTER_TAG_LEGACY}, 2);
	if (r >= 0)
		r = aws_paginate_query(c->aws, AWS_SVC_EC2, "DescribeRouteTables", &q, &p, err);
	aws_query_release(&q);
	if (r < 0) {
		ccm_route_tables_free(list, n);
		return r;
	}
	/* tag-key matched either key: keep the tables tagged for this cluster */
	if (!c->route_table_ids) {
		size_t k = 0;
		for (size_t i = 0; i < n; i++) {
			if (ccm_tags_have_cluster(list[i].tags, list[i].n_tags, cluster_id))
				list[k++] = list[i];
			else
				ccm_route_table_release(&list[i]);
		}
		n = k;
	}
	*ret = list;
	*ret_n = n;
	return 0;
}

const char *ccm_route_target_eni(const struct ec2_instance *i)
{
	if (i->n_enis < 2)
		return NULL;
	for (size_t k = 0; k < i->n_enis; k++)
		if (i->enis[k].device_index == 0)
			return i->enis[k].id;
	return NULL;
}

int ccm_cloud_put_route(struct ccm_cloud *c, const char *table, const char *cidr, bool v6,
			const struct ec2_instance *target, bool replace, struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	const char *eni = ccm_route_target_eni(target);
	int r;

	if ((r = aws_query_add(&q, "RouteTableId", table)) >= 0 &&
	    (r = aws_query_add(&q, v6 ? "DestinationIpv6CidrBlock" : "DestinationCidrBlock",
			       cidr)) >= 0)
		r = eni ? aws_query_add(&q, "NetworkInterfaceId", eni)
			: aws_query_add(&q, "InstanceId", target->id);
	if (r >= 0)
		r = aws_call_query(c->aws, AWS_SVC_EC2, replace ? "ReplaceRoute" : "CreateRoute",
				   &q, &rep, err);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

int ccm_cloud_delete_route(struct ccm_cloud *c, const char *table, const char *cidr, bool v6,
			   struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	if ((r = aws_query_add(&q, "RouteTableId", table)) >= 0 &&
	    (r = aws_query_add(&q, v6 ? "DestinationIpv6CidrBlock" : "DestinationCidrBlock",
			       cidr)) >= 0)
		r = aws_call_query(c->aws, AWS_SVC_EC2, "DeleteRoute", &q, &rep, err);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r == -ENOENT ? 0 : r;
}

int ccm_cloud_disable_src_dst_check(struct ccm_cloud *c, const struct ec2_instance *i,
				    struct aws_error *err)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	const char *eni = ccm_route_target_eni(i);
	const char *action;
	bool on = i->source_dest_check;
	int r;

	if (eni)
		for (size_t k = 0; k < i->n_enis; k++)
			if (i->enis[k].id && strcmp(i->enis[k].id, eni) == 0)
				on = i->enis[k].source_dest_check;
	if (!on)
		return 0;
	if (eni) {
		action = "ModifyNetworkInterfaceAttribute";
		r = aws_query_add(&q, "NetworkInterfaceId", eni);
	} else {
		action = "ModifyInstanceAttribute";
		r = aws_query_add(&q, "InstanceId", i->id);
	}
	if (r >= 0 && (r = aws_query_add(&q, "SourceDestCheck.Value", "false")) >= 0)
		r = aws_call_query(c->aws, AWS_SVC_EC2, action, &q, &rep, err);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r < 0 ? r : 1;
}
