/* What the cloud controller manager made for the cluster's Services, removed before the network
 * (CAPA's deleteAWSCloudProviderELBs / deleteAWSCloudProviderNLBs and external-resource GC,
 * ../shared/reference/capa.md §8, §14): a VPC still holding them cannot be deleted.
 *
 * - Load balancers: classic ELBs, then v2 ones (NLB/ALB), in the cluster's VPC and tagged
 *   kubernetes.io/cluster/<c>=owned. Neither API filters by tag or VPC: DescribeLoadBalancers
 *   is paged (400 a page), kept when its VPC is the cluster's, and only those get DescribeTags
 *   (20 names or ARNs a call). A v2 one loses its listeners, then its target groups, then
 *   itself. All are polled until gone.
 * - Security groups: those in the VPC tagged kubernetes.io/cluster/<c>=owned that CAPA did not
 *   make (no sigs.k8s.io/cluster-api-provider-aws/cluster/<c> tag: the ccm's k8s-elb-*). Every
 *   ingress rule of the VPC's groups naming one of them is revoked first, then they go.
 * - The AWSCluster annotated aws.cluster.x-k8s.io/external-resource-gc: "false" skips both.
 *
 * It runs only on a delete pass, so its whole-region load-balancer list is paid once a pass. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/rest.h"
#include "modules/capa/capa_cluster.h"
#include "modules/capa/capa_net.h"

#define GC_MAX 256	  /* load balancers or groups of one cluster removed in one pass */
#define GC_TAG_BATCH 20	  /* DescribeTags takes at most 20 names or ARNs */
#define GC_MAX_PAGES 100  /* DescribeLoadBalancers pages of 400 */
#define GC_WAIT_S 120	  /* a deleted load balancer is polled this long */
#define GC_REVOKE_MAX 100 /* rules revoked in one call */

/* The two load-balancer APIs, told apart by their field names. */
struct gc_lb_api {
	enum aws_service svc;
	const char *kind;     /* for logs */
	const char *list;     /* DescribeLoadBalancers' list */
	const char *id;	      /* the name (classic) or ARN (v2) of an item */
	const char *vpc;      /* its VPC field */
	const char *tag_ids;  /* DescribeTags' parameter */
	const char *tag_id;   /* a TagDescriptions item's id */
	const char *describe; /* DescribeLoadBalancers of one */
	const char *del;      /* DeleteLoadBalancer's parameter */
};

static const struct gc_lb_api gc_elb = {
    .svc = AWS_SVC_ELB,
    .kind = "classic",
    .list = "LoadBalancerDescriptions",
    .id = "LoadBalancerName",
    .vpc = "VPCId",
    .tag_ids = "LoadBalancerNames.member.%zu",
    .tag_id = "LoadBalancerName",
    .describe = "LoadBalancerNames.member.1",
    .del = "LoadBalancerName",
};
static const struct gc_lb_api gc_elbv2 = {
    .svc = AWS_SVC_ELBV2,
    .kind = "v2",
    .list = "LoadBalancers",
    .id = "LoadBalancerArn",
    .vpc = "VpcId",
    .tag_ids = "ResourceArns.member.%zu",
    .tag_id = "ResourceArn",
    .describe = "LoadBalancerArns.member.1",
    .del = "LoadBalancerArn",
};

struct gc_set {
	char *v[GC_MAX];
	size_t n;
};

static void gc_set_release(struct gc_set *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->v[i]);
	g->n = 0;
}

static int gc_set_add(struct capa_scope *s, struct gc_set *g, const char *v)
{
	if (!v || !*v)
		return 0;
	if (g->n >= GC_MAX) {
		str_printf(s->err, sizeof(s->err), "more than %d objects of the ccm to remove",
			   GC_MAX);
		return -E2BIG;
	}
	if (!(g->v[g->n] = strdup(v)))
		return -ENOMEM;
	g->n++;
	return 0;
}

static bool gc_set_has(const struct gc_set *g, const char *v)
{
	for (size_t i = 0; v && i < g->n; i++)
		if (strcmp(g->v[i], v) == 0)
			return true;
	return false;
}

/* Whether a Tags list (Key/Value members) holds key=owned. */
static bool tags_owned(const xmlNode *tags, const char *key)
{
	for (const xmlNode *t = tags; t; t = aws_xml_next(t)) {
		const char *k = aws_xml_text(t, "Key"), *v = aws_xml_text(t, "Value");
		if (k && v && strcmp(k, key) == 0 && strcmp(v, "owned") == 0)
			return true;
	}
	return false;
}

static int lb_call(struct capa_scope *s, const struct gc_lb_api *api, const char *action,
		   const struct aws_query *q, struct aws_reply *rep)
{
	if (!str_has_prefix(action, "Describe") && !controllers_may_act(&s->x->run))
		return -ECANCELED;
	return capa_scope_call(s, api->svc, action, q, rep);
}

/* The load balancers of the VPC (every page of DescribeLoadBalancers). */
static int lb_in_vpc(struct capa_scope *s, const struct gc_lb_api *api, const char *vpc,
		     struct gc_set *out)
{
	char marker[1024] = "";
	int r = 0;

	for (int page = 0; page < GC_MAX_PAGES; page++) {
		struct aws_query q = AWS_QUERY_INIT;
		struct aws_reply rep = {0};
		aws_query_add_int(&q, "PageSize", 400);
		if (marker[0])
			aws_query_add(&q, "Marker", marker);
		r = lb_call(s, api, "DescribeLoadBalancers", &q, &rep);
		aws_query_release(&q);
		if (r < 0)
			return r;
		for (const xmlNode *it = aws_xml_list(rep.result, api->list); it && r >= 0;
		     it = aws_xml_next(it)) {
			const char *v = aws_xml_text(it, api->vpc);
			if (v && strcmp(v, vpc) == 0)
				r = gc_set_add(s, out, aws_xml_text(it, api->id));
		}
		capa_strcpy(marker, sizeof(marker), aws_xml_text(rep.result, "NextMarker"));
		aws_reply_release(&rep);
		if (r < 0 || !marker[0])
			return r;
	}
	str_printf(s->err, sizeof(s->err), "DescribeLoadBalancers: more than %d pages",
		   GC_MAX_PAGES);
	return -E2BIG;
}

/* Of in, those tagged kubernetes.io/cluster/<c>=owned (DescribeTags, 20 a call). */
static int lb_owned(struct capa_scope *s, const struct gc_lb_api *api, const struct gc_set *in,
		    struct gc_set *out)
{
	char key[320];
	int r = 0;

	snprintf(key, sizeof(key), CAPA_TAG_K8S_CLUSTER_PREFIX "%s", s->name);
	for (size_t i = 0; i < in->n && r >= 0; i += GC_TAG_BATCH) {
		struct aws_query q = AWS_QUERY_INIT;
		struct aws_reply rep = {0};
		for (size_t k = i; k < in->n && k < i + GC_TAG_BATCH; k++)
			aws_query_addf(&q, in->v[k], api->tag_ids, k - i + 1);
		r = lb_call(s, api, "DescribeTags", &q, &rep);
		aws_query_release(&q);
		for (const xmlNode *it = aws_xml_list(rep.result, "TagDescriptions"); r >= 0 && it;
		     it = aws_xml_next(it))
			if (tags_owned(aws_xml_list(it, "Tags"), key))
				r = gc_set_add(s, out, aws_xml_text(it, api->tag_id));
		aws_reply_release(&rep);
	}
	return r;
}

/* One parameter, one call, the reply dropped. */
static int lb_call1(struct capa_scope *s, const struct gc_lb_api *api, const char *action,
		    const char *param, const char *v)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	aws_query_add(&q, param, v);
	int r = lb_call(s, api, action, &q, &rep);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

/* The ARNs of one list of a v2 load balancer's (Listeners, TargetGroups) into out. */
static int lbv2_children(struct capa_scope *s, const char *arn, const char *describe,
			 const char *list, const char *id, struct gc_set *out)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int r;

	aws_query_add(&q, "LoadBalancerArn", arn);
	r = lb_call(s, &gc_elbv2, describe, &q, &rep);
	aws_query_release(&q);
	if (r == -ENOENT && strcmp(s->code, "TargetGroupNotFound") == 0)
		return 0; /* moto's answer for a load balancer without any */
	for (const xmlNode *it = aws_xml_list(rep.result, list); r >= 0 && it;
	     it = aws_xml_next(it))
		r = gc_set_add(s, out, aws_xml_text(it, id));
	aws_reply_release(&rep);
	return r;
}

/* Deletes each of set (a NotFound is done already). */
static int lbv2_delete_each(struct capa_scope *s, const char *action, const char *param,
			    const struct gc_set *set)
{
	int r = 0;

	for (size_t i = 0; i < set->n && r >= 0; i++)
		if ((r = lb_call1(s, &gc_elbv2, action, param, set->v[i])) == -ENOENT)
			r = 0;
	return r;
}

/* A v2 load balancer's listeners, then its target groups (listed first: AWS links a target
 * group to its load balancer only through the listeners). */
static int lbv2_parts_delete(struct capa_scope *s, const char *arn)
{
	struct gc_set ls = {0}, tgs = {0};
	int r;

	r = lbv2_children(s, arn, "DescribeTargetGroups", "TargetGroups", "TargetGroupArn", &tgs);
	if (r >= 0)
		r = lbv2_children(s, arn, "DescribeListeners", "Listeners", "ListenerArn", &ls);
	if (r >= 0)
		r = lbv2_delete_each(s, "DeleteListener", "ListenerArn", &ls);
	if (r >= 0)
		r = lbv2_delete_each(s, "DeleteTargetGroup", "TargetGroupArn", &tgs);
	gc_set_release(&ls);
	gc_set_release(&tgs);
	return r;
}

/* Polls until every load balancer of set is gone (or GC_WAIT_S passed: retried later). */
static int lb_wait_gone(struct capa_scope *s, const struct gc_lb_api *api, const struct gc_set *set)
{
	int64_t deadline = now_mono_ns() + GC_WAIT_S * NSEC_PER_SEC;

	for (size_t i = 0; i < set->n; i++) {
		int r;
		while ((r = lb_call1(s, api, "DescribeLoadBalancers", api->describe, set->v[i])) ==
		       0) {
			if (now_mono_ns() > deadline) {
				str_printf(s->err, sizeof(s->err), "load balancer %s still exists",
					   set->v[i]);
				return -EAGAIN;
			}
			if (cancel_wait(s->x->cancel, 2 * NSEC_PER_SEC))
				return -ECANCELED;
		}
		/* gone only on the load balancer's own NotFound: another one proves nothing */
		if (r == -ENOENT && strcmp(s->code, "LoadBalancerNotFound") != 0)
			return -EREMOTEIO;
		if (r != -ENOENT)
			return r;
	}
	return 0;
}

static int lb_gc(struct capa_scope *s, const struct gc_lb_api *api, const char *vpc)
{
	struct gc_set in = {0}, own = {0};
	int r;

	if ((r = lb_in_vpc(s, api, vpc, &in)) < 0 || (r = lb_owned(s, api, &in, &own)) < 0)
		goto out;
	for (size_t i = 0; i < own.n && r >= 0; i++) {
		const char *id = own.v[i];
		if (api == &gc_elbv2 && (r = lbv2_parts_delete(s, id)) < 0)
			break;
		r = lb_call1(s, api, "DeleteLoadBalancer", api->del, id);
		if (r == -ENOENT)
			r = 0;
		if (r >= 0)
			log_info("deleting the ccm's load balancer", KV_S("cluster", s->name),
				 KV_S("type", api->kind), KV_S("id", id));
	}
	if (r >= 0)
		r = lb_wait_gone(s, api, &own);
out:
	gc_set_release(&in);
	gc_set_release(&own);
	return r;
}

/* ---- security groups ---- */

/* Revokes every ingress rule of one group that names a group of gone. */
static int sg_revoke_refs(struct capa_scope *s, const xmlNode *g, const struct gc_set *gone)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	int k = 0, r = 0;

	aws_query_add(&q, "GroupId", aws_xml_text(g, "groupId"));
	for (const xmlNode *p = aws_xml_list(g, "ipPermissions"); p; p = aws_xml_next(p)) {
		for (const xmlNode *u = aws_xml_list(p, "groups"); u; u = aws_xml_next(u)) {
			const char *peer = aws_xml_text(u, "groupId");
			const char *desc = aws_xml_text(u, "description");
			const char *from = aws_xml_text(p, "fromPort"),
				   *to = aws_xml_text(p, "toPort");
			if (!gc_set_has(gone, peer))
				continue;
			if (++k > GC_REVOKE_MAX) {
				str_printf(s->err, sizeof(s->err), "more than %d rules to revoke",
					   GC_REVOKE_MAX);
				r = -E2BIG;
				goto out;
			}
			aws_query_addf(&q, aws_xml_text(p, "ipProtocol"),
				       "IpPermissions.%d.IpProtocol", k);
			if (from)
				aws_query_addf(&q, from, "IpPermissions.%d.FromPort", k);
			if (to)
				aws_query_addf(&q, to, "IpPermissions.%d.ToPort", k);
			aws_query_addf(&q, peer, "IpPermissions.%d.Groups.1.GroupId", k);
			/* moto matches a peer's rule with its description; AWS ignores it */
			if (desc && *desc)
				aws_query_addf(&q, desc, "IpPermissions.%d.Groups.1.Description",
					       k);
		}
	}
	if (k > 0 &&
	    (r = capa_net_create(s, "RevokeSecurityGroupIngress", &q, NULL, NULL, &rep)) >= 0)
		log_info("revoked rules naming the ccm's security groups", KV_S("cluster", s->name),
			 KV_S("group", aws_xml_text(g, "groupId")), KV_I("rules", k));
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

static int sg_gc(struct capa_scope *s, const char *vpc)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct gc_set gone = {0};
	char filter[340];
	int r;

	snprintf(filter, sizeof(filter), "tag:" CAPA_TAG_K8S_CLUSTER_PREFIX "%s", s->name);
	aws_query_add_filter(&q, "vpc-id", (const char *[]){vpc}, 1);
	aws_query_add_filter(&q, filter, (const char *[]){"owned"}, 1);
	r = capa_scope_ec2(s, "DescribeSecurityGroups", &q, &rep);
	aws_query_release(&q);
	for (const xmlNode *it = aws_xml_list(rep.result, "securityGroupInfo"); r >= 0 && it;
	     it = aws_xml_next(it))
		if (!capa_net_owned(s, it)) /* CAPA's own lb group has the tag too */
			r = gc_set_add(s, &gone, aws_xml_text(it, "groupId"));
	aws_reply_release(&rep);
	if (r < 0 || gone.n == 0)
		goto out;
	/* the rules naming them, in every group of the VPC (the ccm adds one to the nodes') */
	aws_query_add_filter(&q, "vpc-id", (const char *[]){vpc}, 1);
	r = capa_scope_ec2(s, "DescribeSecurityGroups", &q, &rep);
	aws_query_release(&q);
	for (const xmlNode *it = aws_xml_list(rep.result, "securityGroupInfo"); r >= 0 && it;
	     it = aws_xml_next(it))
		r = sg_revoke_refs(s, it, &gone);
	aws_reply_release(&rep);
	for (size_t i = 0; i < gone.n && r >= 0; i++) {
		aws_query_add(&q, "GroupId", gone.v[i]);
		r = capa_net_create(s, "DeleteSecurityGroup", &q, NULL, NULL, &rep);
		aws_reply_release(&rep);
		aws_query_release(&q);
		if (r == -ENOENT)
			r = 0;
		else if (r == -EBUSY) /* AWS: the deleted ELB's interfaces may hold it a while */
			r = -EAGAIN;
		else if (r >= 0)
			log_info("deleted the ccm's security group", KV_S("cluster", s->name),
				 KV_S("group", gone.v[i]));
	}
out:
	gc_set_release(&gone);
	return r;
}

static bool gc_enabled(const struct capa_scope *s)
{
	const cJSON *a = json_find(s->obj, "metadata.annotations");
	const char *v = a ? json_str_key(a, CAPA_GC_ANNOTATION) : NULL;
	return !v || strcmp(v, "false") != 0;
}

int capa_gc_delete(struct capa_scope *s)
{
	const char *vpc = capa_vpc_id(s);
	int r;

	if (!vpc || !*vpc)
		return 0; /* no network was made: nothing of the ccm's can be in it */
	if (!gc_enabled(s)) {
		log_info("external resource GC is off: the ccm's load balancers and security "
			 "groups are left",
			 KV_S("cluster", s->name), KV_S("annotation", CAPA_GC_ANNOTATION));
		return 0;
	}
	if ((r = lb_gc(s, &gc_elb, vpc)) < 0 || (r = lb_gc(s, &gc_elbv2, vpc)) < 0)
		return r;
	return sg_gc(s, vpc);
}

int capa_gc_machines_left(struct capa_scope *s)
{
	char sel[320];
	cJSON *list = NULL;
	struct kube_status st = {0};
	int r;

	snprintf(sel, sizeof(sel), CAPA_CLUSTER_NAME_LABEL "=%s", s->name);
	r = kube_list(s->x->kc,
		      KUBE_REF(&capa_awsmachines, json_str(s->obj, "metadata.namespace"), NULL),
		      &(struct kube_list_opts){.label_selector = sel, .limit = 1}, &list, &st);
	if (r < 0) {
		str_printf(s->err, sizeof(s->err), "cannot list the AWSMachines: %s", st.message);
		return r;
	}
	r = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(list, "items"));
	cJSON_Delete(list);
	return r;
}
