/* What the classic and the network API load balancers share (capa_lb.c, capa_lb_nlb.c): the
 * type from the spec, the fields of a new load balancer (scheme, one subnet per zone, the
 * apiserver-lb group, tags), and what a found one publishes: status.networkStatus.apiServerElb
 * and spec.controlPlaneEndpoint. */
#include <errno.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "modules/capa/capa_cluster.h"
#include "modules/capa/capa_net.h"

#define API_PORT 6443

int capa_lb_create_query(struct capa_scope *s, const char *name, bool internal,
			 struct aws_query *q)
{
	struct capa_tags t = {0};
	const cJSON *sn;
	char seen[CAPA_MAX_ZONES][64];
	int n = 0, r;

	aws_query_add(q, "Scheme", internal ? "internal" : "internet-facing");
	/* one subnet per zone: public ones for an internet-facing LB, private for an internal */
	cJSON_ArrayForEach(sn, json_find(s->obj, "spec.network.subnets"))
	{
		bool pub = false, dup = false;
		const char *az = json_str(sn, "availabilityZone"), *id = json_str(sn, "id");
		json_get_bool(sn, "isPublic", &pub);
		if (!az || !id || pub == internal || n >= CAPA_MAX_ZONES)
			continue;
		for (int i = 0; i < n; i++)
			dup |= strcmp(seen[i], az) == 0;
		if (dup)
			continue;
		capa_strcpy(seen[n++], sizeof(seen[0]), az);
		aws_query_addf(q, id, "Subnets.member.%d", n);
	}
	aws_query_add(q, "SecurityGroups.member.1", s->sg_apilb);
	if ((r = capa_net_tags(s, &t, "apiserver", name)) >= 0)
		r = aws_query_add_tags(q, "Tags.member", (const char *const *)t.key,
				       (const char *const *)t.value, t.n);
	capa_tags_release(&t);
	if (r >= 0 && n == 0) {
		str_printf(s->err, sizeof(s->err), "no %s subnet for the load balancer",
			   internal ? "private" : "public");
		r = -ENOENT;
	}
	return r;
}

int capa_lb_endpoint(struct capa_scope *s, const char *dns)
{
	const char *endpoint = json_str(s->obj, "spec.controlPlaneEndpoint.host");
	cJSON *spec = cJSON_GetObjectItemCaseSensitive(s->obj, "spec");
	int r = 0;

	if (endpoint && strcmp(endpoint, dns) == 0)
		return 0;
	if ((r = json_set_str(spec, "controlPlaneEndpoint.host", dns)) >= 0 &&
	    (r = json_set_number(spec, "controlPlaneEndpoint.port", API_PORT)) >= 0)
		s->spec_changed = true;
	return r;
}

const char *capa_lb_type(const struct capa_scope *s)
{
	const char *t = json_str(s->obj, "spec.controlPlaneLoadBalancer.loadBalancerType");
	return t && *t ? t : "classic";
}


int capa_lb_publish(struct capa_scope *s, const struct capa_lb_desc *l, const xmlNode *d)
{
	cJSON *st = capa_scope_status(s), *ns, *e = cJSON_CreateObject(), *a;
	const char *scheme = aws_xml_text(d, "Scheme");
	int r;

	if (!st || !e) {
		cJSON_Delete(e);
		return -ENOMEM;
	}
	cJSON_AddStringToObject(e, "name", l->name);
	if (l->arn)
		cJSON_AddStringToObject(e, "arn", l->arn);
	cJSON_AddStringToObject(e, "dnsName", l->dns);
	cJSON_AddStringToObject(e, "scheme", scheme && *scheme ? scheme : "internet-facing");
	cJSON_AddStringToObject(e, "loadBalancerType", l->type);
	/* classic: Subnets/member is the ID; v2: AvailabilityZones/member/SubnetId */
	if ((a = cJSON_AddArrayToObject(e, "subnetIds")))
		for (const xmlNode *it = aws_xml_list(d, l->subnets); it; it = aws_xml_next(it)) {
			const char *id = aws_xml_text(it, l->subnet_field);
			if (id)
				cJSON_AddItemToArray(a, cJSON_CreateString(id));
		}
	if ((a = cJSON_AddArrayToObject(e, "securityGroupIds")))
		for (const xmlNode *it = aws_xml_list(d, "SecurityGroups"); it; it = aws_xml_next(it))
			cJSON_AddItemToArray(a, cJSON_CreateString(aws_xml_text(it, NULL)));
	if (!(ns = cJSON_GetObjectItemCaseSensitive(st, "networkStatus")))
		ns = cJSON_AddObjectToObject(st, "networkStatus");
	if ((r = ns ? json_put(ns, "apiServerElb", e) : -ENOMEM) < 0)
		return r;
	return capa_lb_endpoint(s, l->dns);
}
