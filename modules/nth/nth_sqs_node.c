/* Queue mode: an instance as EC2 describes it, and its Node (see nth_sqs.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/ec2.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/kube/rest.h"
#include "modules/nth/nth_sqs_int.h"

int nth_sqs_describe(struct aws_client *aws, const char *instance_id, struct ec2_instance *ret)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct aws_error err;
	struct ec2_instance *list = NULL;
	size_t n = 0;
	char buf[700];
	int r;

	if ((r = aws_query_add(&q, "InstanceId.1", instance_id)) < 0)
		goto out;
	r = aws_call_query(aws, AWS_SVC_EC2, "DescribeInstances", &q, &rep, &err);
	if (r == -ENOENT && aws_error_is(&err, "InvalidInstanceID.NotFound"))
		goto out; /* EC2 says it does not exist: an explicit not-found */
	if (r == -ENOENT)
		r = -EREMOTEIO; /* another "not found" is not evidence about the instance */
	if (r < 0) {
		log_error("DescribeInstances failed", KV_S("instance", instance_id),
			  KV_S("error", aws_error_str(&err, buf, sizeof(buf))), KV_E(r));
		goto out;
	}
	if ((r = ec2_instances_parse(rep.result, &list, &n)) < 0) {
		log_error("unusable DescribeInstances reply", KV_S("instance", instance_id), KV_E(r));
		goto out;
	}
	r = -ENOENT; /* an empty reservationSet for this ID: EC2 knows no such instance */
	for (size_t i = 0; i < n; i++) {
		if (r == -ENOENT && strcmp(list[i].id, instance_id) == 0) {
			*ret = list[i];
			memset(&list[i], 0, sizeof(list[i]));
			r = 0;
		}
		ec2_instance_release(&list[i]);
	}
	free(list);
out:
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

struct match_pid {
	const char *provider_id;
	char *name;
};

static int on_node_pid(void *ud, cJSON *item)
{
	struct match_pid *m = ud;
	const char *pid = json_str(item, "spec.providerID"), *name = json_str(item, "metadata.name");

	if (!m->name && pid && name && strcmp(pid, m->provider_id) == 0 && !(m->name = strdup(name))) {
		cJSON_Delete(item);
		return -ENOMEM;
	}
	cJSON_Delete(item);
	return 0;
}

static int copy_name(const cJSON *node, char *out, size_t n)
{
	const char *name = json_str(node, "metadata.name");

	if (!name || strlen(name) >= n)
		return -EBADMSG;
	memcpy(out, name, strlen(name) + 1);
	return 0;
}

int nth_sqs_find_node(struct kube_client *kc, bool use_provider_id, const char *private_dns,
		      const char *provider_id, char *out, size_t n)
{
	struct kube_status st;
	cJSON *list = NULL, *node = NULL;
	const cJSON *items;
	char sel[600], shortname[256];
	size_t len;
	int r;

	if (use_provider_id) {
		struct match_pid m = {.provider_id = provider_id};

		if ((r = kube_list_each(kc, KUBE_REF(&kube_nodes, NULL, NULL), NULL, on_node_pid, &m,
					NULL, &st)) < 0) {
			free(m.name);
			return r;
		}
		if (!m.name)
			return -ENOENT; /* a complete list without it */
		len = strlen(m.name);
		r = len < n ? (memcpy(out, m.name, len + 1), 0) : -ENOBUFS;
		free(m.name);
		return r;
	}
	if (!private_dns || !*private_dns)
		return -ENOENT;
	len = strcspn(private_dns, ".");
	if (len >= sizeof(shortname))
		return -EINVAL;
	memcpy(shortname, private_dns, len);
	shortname[len] = '\0';
	snprintf(sel, sizeof(sel), "kubernetes.io/hostname in (%s,%s)", private_dns, shortname);
	r = kube_list(kc, KUBE_REF(&kube_nodes, NULL, NULL),
		      &(struct kube_list_opts){.label_selector = sel}, &list, &st);
	if (r < 0)
		return r;
	if (json_get_array(list, "items", &items) == 0 && cJSON_GetArraySize(items) > 0) {
		r = copy_name(cJSON_GetArrayItem(items, 0), out, n);
		cJSON_Delete(list);
		return r;
	}
	cJSON_Delete(list);
	/* no labelled Node: the Node named like the instance, or an explicit 404 */
	if ((r = kube_get(kc, KUBE_REF(&kube_nodes, NULL, private_dns), &node, &st)) < 0)
		return r;
	r = copy_name(node, out, n);
	cJSON_Delete(node);
	return r;
}

int nth_sqs_node_ready(struct kube_client *kc, const char *instance_id, const char *provider_id,
		       char *out, size_t n)
{
	struct kube_status st;
	cJSON *list = NULL, *it;
	const cJSON *items;
	char sel[128];
	int r, found = -ENOENT;

	snprintf(sel, sizeof(sel), "alpha.eksctl.io/instance-id=%s", instance_id);
	if ((r = kube_list(kc, KUBE_REF(&kube_nodes, NULL, NULL),
			   &(struct kube_list_opts){.label_selector = sel}, &list, &st)) < 0)
		return r;
	if (json_get_array(list, "items", &items) == 0 && cJSON_GetArraySize(items) == 0) {
		cJSON_Delete(list);
		list = NULL;
		if ((r = kube_list(kc, KUBE_REF(&kube_nodes, NULL, NULL), NULL, &list, &st)) < 0)
			return r;
		json_get_array(list, "items", &items);
	}
	cJSON_ArrayForEach(it, items)
	{
		const char *pid = json_str(it, "spec.providerID"), *lbl;
		const cJSON *labels = json_find(it, "metadata.labels"), *c;

		lbl = json_str_key(labels, "alpha.eksctl.io/instance-id");
		if (!(lbl && strcmp(lbl, instance_id) == 0) && !(pid && strcmp(pid, provider_id) == 0))
			continue;
		found = -EAGAIN; /* the Node exists: ready? */
		cJSON_ArrayForEach(c, json_find(it, "status.conditions"))
		{
			const char *t = json_str(c, "type"), *s = json_str(c, "status");

			if (t && s && strcmp(t, "Ready") == 0 && strcmp(s, "True") == 0)
				found = copy_name(it, out, n);
		}
		break;
	}
	cJSON_Delete(list);
	return found;
}
