/* Control-plane machines in the API load balancer (reference capa.md §6 "Attaching machines",
 * §9 step 7, §11 delete, §13 ELBAttached; awsmachine_controller.go reconcileLBAttachment).
 *
 * Only a control-plane machine is attached, to the load balancer the AWSCluster's status names
 * (status.networkStatus.apiServerElb: its name, and for a v2 one its ARN): none recorded yet,
 * or loadBalancerType disabled, means nothing to do. A running instance is registered:
 *   classic  DescribeLoadBalancers of the name (its Instances tell whether it already is), the
 *            instance's zone must be one of the load balancer's subnets' zones (else ELBAttached
 *            False, ELBAttachFailed), RegisterInstancesWithLoadBalancer;
 *   nlb      DescribeListeners of the ARN, DescribeTargetHealth of each listener's target group,
 *            RegisterTargets in each one it is missing from.
 * Each reconcile reads the load balancer once and makes no write when the instance is in.
 * An instance that is not running, or whose AWSMachine is being deleted, is deregistered when
 * it is registered (before the instance is terminated). */
#include <errno.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "modules/capa/capa_machine_ctl.h"

#define COND_ELB "ELBAttached"
#define MAX_TGS 16

static void cond(struct capa_mscope *s, const char *st, const char *sev, const char *reason,
		 const char *msg)
{
	cJSON *status = cJSON_GetObjectItemCaseSensitive(s->obj, "status");
	if (!cJSON_IsObject(status)) {
		cJSON_DeleteItemFromObjectCaseSensitive(s->obj, "status");
		status = cJSON_AddObjectToObject(s->obj, "status");
	}
	if (status)
		capa_condition_set(status, COND_ELB, st, sev, reason, msg);
}

/* The load balancer of a control-plane machine: false when there is none to be in. */
static bool machine_lb(const struct capa_mscope *s, const char **ret_type, const char **ret_name,
		       const char **ret_arn)
{
	const cJSON *ac = s->m.awscluster;
	const char *type = json_str(ac, "spec.controlPlaneLoadBalancer.loadBalancerType");
	const char *name = json_str(ac, "status.networkStatus.apiServerElb.name");

	if (!s->m.role || strcmp(s->m.role, "control-plane") != 0)
		return false;
	if (!type || !*type)
		type = "classic";
	if (strcmp(type, "disabled") == 0 || !name || !*name)
		return false;
	*ret_type = type;
	*ret_name = name;
	*ret_arn = json_str(ac, "status.networkStatus.apiServerElb.arn");
	return true;
}

static bool is_classic(const char *type)
{
	return strcmp(type, "classic") == 0 || strcmp(type, "elb") == 0;
}

/* The zone of one of the AWSCluster's subnets (by id or resourceID), or NULL. */
static const char *subnet_zone(const cJSON *ac, const char *id)
{
	const cJSON *sn;
	if (!id)
		return NULL;
	cJSON_ArrayForEach(sn, json_find(ac, "spec.network.subnets"))
	{
		const char *a = json_str(sn, "id"), *b = json_str(sn, "resourceID");
		if ((a && strcmp(a, id) == 0) || (b && strcmp(b, id) == 0))
			return json_str(sn, "availabilityZone");
	}
	return NULL;
}

/* ---- classic ---- */

/* DescribeLoadBalancers of the name: its description in *ret_d (points into rep). */
static int classic_describe(struct capa_mscope *s, const char *name, struct aws_reply *rep,
			    const xmlNode **ret_d)
{
	struct aws_query q = AWS_QUERY_INIT;
	int r = aws_query_add(&q, "LoadBalancerNames.member.1", name);
	if (r >= 0)
		r = capa_mach_elb(s, AWS_SVC_ELB, "DescribeLoadBalancers", &q, rep);
	aws_query_release(&q);
	if (r >= 0 && !(*ret_d = aws_xml_list(rep->result, "LoadBalancerDescriptions")))
		r = -ENOENT;
	if (r == -ENOENT)
		str_printf(s->err, sizeof(s->err), "the API load balancer %s is not found", name);
	return r;
}

static bool classic_has(const xmlNode *d, const char *id)
{
	for (const xmlNode *it = aws_xml_list(d, "Instances"); it; it = aws_xml_next(it)) {
		const char *v = aws_xml_text(it, "InstanceId");
		if (v && strcmp(v, id) == 0)
			return true;
	}
	return false;
}

/* The instance's zone is one of the load balancer's subnets' zones. */
static bool classic_in_zone(struct capa_mscope *s, const xmlNode *d, const char *zone)
{
	for (const xmlNode *it = aws_xml_list(d, "Subnets"); it; it = aws_xml_next(it)) {
		const char *z = subnet_zone(s->m.awscluster, aws_xml_text(it, NULL));
		if (z && zone && strcmp(z, zone) == 0)
			return true;
	}
	return false;
}

static int classic_set(struct capa_mscope *s, const char *name, const char *id, bool reg)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	int r = aws_query_add(&q, "LoadBalancerName", name);
	if (r >= 0)
		r = aws_query_add(&q, "Instances.member.1.InstanceId", id);
	if (r >= 0)
		r = capa_mach_elb(s, AWS_SVC_ELB,
				  reg ? "RegisterInstancesWithLoadBalancer"
				      : "DeregisterInstancesFromLoadBalancer",
				  &q, &rep);
	aws_query_release(&q);
	aws_reply_release(&rep);
	return r;
}

/* want: registered (true) or not. 1 when a call changed it, 0 when nothing was to do. */
static int classic_put(struct capa_mscope *s, const char *name, const struct ec2_instance *i,
		       bool want)
{
	struct aws_reply rep = { 0 };
	const xmlNode *d = NULL;
	int r = classic_describe(s, name, &rep, &d);
	if (r == -ENOENT && !want)
		r = 0; /* no load balancer: nothing to leave */
	if (r < 0 || !d || classic_has(d, i->id) == want)
		goto out;
	if (want) {
		const char *zone = subnet_zone(s->m.awscluster, i->subnet_id);
		if (!zone)
			zone = i->zone;
		if (!classic_in_zone(s, d, zone)) {
			str_printf(s->err, sizeof(s->err),
				   "failed to register instance with APIServer ELB \"%s\": instance "
				   "is in availability zone \"%s\", no public subnets attached to the "
				   "ELB in the same zone",
				   name, zone ? zone : "");
			r = -EADDRNOTAVAIL;
			goto out;
		}
	}
	if ((r = classic_set(s, name, i->id, want)) >= 0)
		r = 1;
out:
	aws_reply_release(&rep);
	return r;
}

/* ---- v2 (nlb) ---- */

struct v2_tgs {
	char arn[MAX_TGS][256];
	bool has[MAX_TGS]; /* the instance is a target of it */
	size_t n;
};

/* The load balancer's ARN: the status's, else DescribeLoadBalancers of the name. */
static int v2_arn(struct capa_mscope *s, const char *name, const char *known, char out[256])
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	int r;

	if (known && *known)
		return str_copy(out, 256, known);
	if ((r = aws_query_add(&q, "Names.member.1", name)) >= 0)
		r = capa_mach_elb(s, AWS_SVC_ELBV2, "DescribeLoadBalancers", &q, &rep);
	const char *arn = r >= 0 ? aws_xml_text(aws_xml_list(rep.result, "LoadBalancers"),
						  "LoadBalancerArn")
				 : NULL;
	if (r >= 0 && !arn)
		r = -ENOENT;
	if (r >= 0)
		r = str_copy(out, 256, arn);
	if (r == -ENOENT)
		str_printf(s->err, sizeof(s->err), "the API load balancer %s is not found", name);
	aws_query_release(&q);
	aws_reply_release(&rep);
	return r;
}

/* The target groups of the load balancer's listeners (each once) and whether id is in each. */
static int v2_tgs(struct capa_mscope *s, const char *lb_arn, const char *id, struct v2_tgs *t)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	int r = aws_query_add(&q, "LoadBalancerArn", lb_arn);

	t->n = 0;
	if (r >= 0)
		r = capa_mach_elb(s, AWS_SVC_ELBV2, "DescribeListeners", &q, &rep);
	aws_query_release(&q);
	for (const xmlNode *l = r >= 0 ? aws_xml_list(rep.result, "Listeners") : NULL; l;
	     l = aws_xml_next(l))
		for (const xmlNode *a = aws_xml_list(l, "DefaultActions"); a; a = aws_xml_next(a)) {
			const char *tg = aws_xml_text(a, "TargetGroupArn");
			bool dup = false;
			for (size_t k = 0; tg && k < t->n; k++)
				dup |= strcmp(t->arn[k], tg) == 0;
			if (!tg || dup || t->n >= MAX_TGS)
				continue;
			str_copy(t->arn[t->n++], sizeof(t->arn[0]), tg);
		}
	aws_reply_release(&rep);
	for (size_t k = 0; r >= 0 && k < t->n; k++) {
		t->has[k] = false;
		if ((r = aws_query_add(&q, "TargetGroupArn", t->arn[k])) >= 0)
			r = capa_mach_elb(s, AWS_SVC_ELBV2, "DescribeTargetHealth", &q, &rep);
		for (const xmlNode *h = r >= 0 ? aws_xml_list(rep.result, "TargetHealthDescriptions")
					       : NULL;
		     h; h = aws_xml_next(h)) {
			const char *tid = aws_xml_text(h, "Target/Id");
			t->has[k] |= tid && strcmp(tid, id) == 0;
		}
		aws_query_release(&q);
		aws_reply_release(&rep);
	}
	return r;
}

static int v2_put(struct capa_mscope *s, const char *name, const char *arn_known,
		  const struct ec2_instance *i, bool want)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	struct v2_tgs t;
	char arn[256];
	int r = v2_arn(s, name, arn_known, arn), calls = 0;

	if (r == -ENOENT && !want)
		return 0;
	if (r < 0 || (r = v2_tgs(s, arn, i->id, &t)) < 0)
		return r;
	if (want && t.n == 0) {
		str_printf(s->err, sizeof(s->err), "the API load balancer %s has no target group yet",
			   name);
		return -EAGAIN;
	}
	for (size_t k = 0; k < t.n && r >= 0; k++) {
		if (t.has[k] == want)
			continue;
		if ((r = aws_query_add(&q, "TargetGroupArn", t.arn[k])) >= 0 &&
		    (r = aws_query_add(&q, "Targets.member.1.Id", i->id)) >= 0)
			r = capa_mach_elb(s, AWS_SVC_ELBV2, want ? "RegisterTargets" : "DeregisterTargets",
					  &q, &rep);
		aws_query_release(&q);
		aws_reply_release(&rep);
		calls++;
	}
	return r < 0 ? r : calls > 0;
}

static int lb_put(struct capa_mscope *s, const struct ec2_instance *i, bool want)
{
	const char *type, *name, *arn;
	if (!i->id || !machine_lb(s, &type, &name, &arn))
		return 0;
	if (is_classic(type))
		return classic_put(s, name, i, want);
	if (strcmp(type, "nlb") == 0)
		return v2_put(s, name, arn, i, want);
	str_printf(s->err, sizeof(s->err), "loadBalancerType %s is not supported", type);
	return -EOPNOTSUPP;
}

int capa_machine_lb_attach(struct capa_mscope *s, const struct ec2_instance *i)
{
	const char *type, *name, *arn;
	if (!i->id || !machine_lb(s, &type, &name, &arn))
		return 0;
	if (strcmp(i->state, "running") != 0)
		return capa_machine_lb_detach(s, i);
	int r = lb_put(s, i, true);
	if (r < 0) {
		cond(s, "False", "Error", "ELBAttachFailed", s->err);
		return r;
	}
	if (r > 0)
		log_info("Control plane instance is registered with the load balancer",
			 KV_S("awsmachine", s->m.awsmachine), KV_S("instance", i->id),
			 KV_S("loadBalancer", name));
	cond(s, "True", NULL, NULL, NULL);
	return 0;
}

int capa_machine_lb_detach(struct capa_mscope *s, const struct ec2_instance *i)
{
	const char *type, *name, *arn;
	if (!i->id || !machine_lb(s, &type, &name, &arn))
		return 0;
	int r = lb_put(s, i, false);
	if (r < 0) {
		cond(s, "False", "Warning", "DeletingFailed", s->err);
		return r;
	}
	if (r > 0) {
		log_info("Control plane instance is deregistered from the load balancer",
			 KV_S("awsmachine", s->m.awsmachine), KV_S("instance", i->id),
			 KV_S("loadBalancer", name));
		cond(s, "False", "Info", "Deleted", NULL);
	}
	return 0;
}
