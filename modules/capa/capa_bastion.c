/* The bastion host (pkg/cloud/services/ec2/bastion.go, reference capa.md §5, §7, §8, §13):
 * with spec.bastion.enabled and both private and public subnets, one instance in the first
 * public subnet with a public IP, the <c>-bastion security group (capa_sg.c gives it TCP 22
 * from allowedCIDRBlocks and TCP 22 from it on the control plane and the nodes), type
 * spec.bastion.instanceType or t3.micro (t2.micro in a us-east-1 zone), image spec.bastion.ami
 * or the newest Canonical Ubuntu 24.04, key sshKeyName or "default", CAPA's tags (role
 * bastion, Name <c>-bastion). It is looked up by its tags before any create, and the create
 * carries a ClientToken made of the AWSCluster's UID and generation, so that neither a retry
 * nor a restart makes a second one. status.bastion describes it; BastionHostReady says how it
 * went. Disabling it, or deleting the cluster, terminates it and waits (up to 2 minutes) for
 * the termination. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/ec2.h"
#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/capa/capa_ami.h"
#include "modules/capa/capa_cluster.h"
#include "modules/capa/capa_net.h"

#define BASTION_ROLE "bastion"
#define TERMINATE_WAIT_NS (120 * NSEC_PER_SEC)
#define TERMINATE_POLL_NS (2 * NSEC_PER_SEC)

bool capa_bastion_enabled(const struct capa_scope *s)
{
	return cJSON_IsTrue(json_find(s->obj, "spec.bastion.enabled"));
}

/* The bastion of the cluster (owned tag, role bastion, not terminated): 0 with *ret, -ENOENT. */
static int bastion_find(struct capa_scope *s, const char *id, struct ec2_instance *ret)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct ec2_instance *list = NULL;
	size_t n = 0;
	char own[320];
	int r;

	capa_owned_key(s, own, sizeof(own));
	if (id) {
		r = aws_query_add(&q, "InstanceId.1", id);
	} else {
		char tag[340];
		snprintf(tag, sizeof(tag), "tag:%s", own);
		r = aws_query_add_filter(&q, tag, (const char *[]){"owned"}, 1);
		if (r >= 0)
			r = aws_query_add_filter(&q, "tag:" CAPA_TAG_ROLE,
						 (const char *[]){BASTION_ROLE}, 1);
		if (r >= 0)
			r = aws_query_add_filter(&q, "instance-state-name",
						 (const char *[]){"pending", "running", "stopping",
								  "stopped", "shutting-down"},
						 5);
	}
	if (r >= 0)
		r = capa_scope_ec2(s, "DescribeInstances", &q, &rep);
	aws_query_release(&q);
	if (r >= 0 && (r = ec2_instances_parse(rep.result, &list, &n)) < 0)
		str_printf(s->err, sizeof(s->err), "DescribeInstances: an instance is unusable");
	if (r >= 0 && n == 0)
		r = -ENOENT;
	if (r >= 0 && n > 1)
		log_warn("more than one bastion carries the cluster's tags: using the first",
			 KV_S("cluster", s->name), KV_U("bastions", n));
	if (r >= 0)
		r = ec2_instance_copy(&list[0], ret);
	while (n > 0)
		ec2_instance_release(&list[--n]);
	free(list);
	aws_reply_release(&rep);
	return r;
}

/* status.bastion, CAPA's Instance fields. */
static int bastion_status(struct capa_scope *s, const struct ec2_instance *i, const char *ami,
			  const char *sg, const char *key)
{
	cJSON *st = capa_scope_status(s), *b = cJSON_CreateObject(), *tags = cJSON_CreateObject();
	const char *was_ami = json_str(s->obj, "status.bastion.imageId");

	if (!st || !b || !tags) {
		cJSON_Delete(b);
		cJSON_Delete(tags);
		return -ENOMEM;
	}
	/* a found instance: DescribeInstances has the image, ec2.h not */
	if (!ami)
		ami = was_ami ? was_ami : json_str(s->obj, "spec.bastion.ami");
	cJSON_AddStringToObject(b, "id", i->id);
	cJSON_AddStringToObject(b, "instanceState", i->state);
	if (i->type)
		cJSON_AddStringToObject(b, "type", i->type);
	if (i->subnet_id)
		cJSON_AddStringToObject(b, "subnetId", i->subnet_id);
	if (i->zone)
		cJSON_AddStringToObject(b, "availabilityZone", i->zone);
	if (ami)
		cJSON_AddStringToObject(b, "imageId", ami);
	if (key)
		cJSON_AddStringToObject(b, "sshKeyName", key);
	cJSON *sgs = cJSON_AddArrayToObject(b, "securityGroupIds");
	if (sgs && sg)
		cJSON_AddItemToArray(sgs, cJSON_CreateString(sg));
	if (i->private_ip)
		cJSON_AddStringToObject(b, "privateIp", i->private_ip);
	if (i->public_ip)
		cJSON_AddStringToObject(b, "publicIp", i->public_ip);
	for (size_t k = 0; k < i->n_tags; k++)
		cJSON_AddStringToObject(tags, i->tags[k].key, i->tags[k].value ? i->tags[k].value : "");
	cJSON_AddItemToObject(b, "tags", tags);
	return json_put(st, "bastion", b);
}

/* The first public subnet, and whether a private one exists too. */
static const cJSON *first_public(struct capa_scope *s, bool *ret_private)
{
	const cJSON *sn, *pub = NULL;
	*ret_private = false;
	cJSON_ArrayForEach(sn, json_find(s->obj, "spec.network.subnets"))
	{
		bool p = false;
		json_get_bool(sn, "isPublic", &p);
		if (p && !pub)
			pub = sn;
		*ret_private |= !p;
	}
	return pub;
}

static int ami_call(void *ud, const char *action, const struct aws_query *q,
		    struct aws_reply *rep)
{
	return capa_scope_ec2(ud, action, q, rep);
}

/* "capa-bastion-" + the UID without dashes + "-" + the generation (EC2 allows 64). */
static int bastion_token(struct capa_scope *s, char *out, size_t n)
{
	const char *uid = json_str(s->obj, "metadata.uid");
	long long gen = 0;
	char hex[40];
	size_t k = 0;

	json_get_int(s->obj, "metadata.generation", &gen);
	for (const char *p = uid ? uid : ""; *p && k + 1 < sizeof(hex); p++)
		if (*p != '-')
			hex[k++] = *p;
	hex[k] = 0;
	if (k == 0)
		return -EINVAL;
	return str_printf(out, n, "capa-bastion-%s-%lld", hex, gen);
}

/* RunInstances without the client's retries: a reply lost on the wire is a failed reconcile,
 * whose retry looks the bastion up by its tags first (and EC2 answers a repeated ClientToken
 * with the same instance). */
static int run_once(struct capa_scope *s, const struct aws_query *q, struct aws_reply *rep)
{
	struct aws_request rq = {.service = AWS_SVC_EC2,
				 .action = "RunInstances",
				 .query = q,
				 .max_attempts = 1,
				 .region = s->region && *s->region ? s->region : NULL,
				 .cancel = s->x->cancel};
	struct aws_error e = {0};
	int r;

	if (!controllers_may_act(&s->x->run))
		return -ECANCELED;
	if ((r = aws_do(s->x->aws, &rq, rep, &e)) < 0) {
		str_printf(s->err, sizeof(s->err), "RunInstances: %s%s%s", e.code,
			   e.code[0] ? ": " : "", e.message);
		capa_strcpy(s->code, sizeof(s->code), e.code);
	}
	return r;
}

static int bastion_create(struct capa_scope *s, const cJSON *subnet, const char *sg,
			  const char *key, char ami[CAPA_AMI_ID_MAX], struct ec2_instance *ret)
{
	const char *type = json_str(s->obj, "spec.bastion.instanceType");
	const char *given = json_str(s->obj, "spec.bastion.ami");
	const char *zone = json_str(subnet, "availabilityZone");
	const char *sid = json_str(subnet, "resourceID");
	struct capa_ami_caller c = {.fn = ami_call, .ud = s, .region = s->region, .err = s->err,
				    .errlen = sizeof(s->err)};
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	struct capa_tags t = {0};
	char name[300], token[80];
	int r;

	if (!sid || !*sid)
		sid = json_str(subnet, "id");
	if (!type || !*type)
		type = zone && strstr(zone, "us-east-1") ? "t2.micro" : "t3.micro";
	if (given && *given)
		r = str_copy(ami, CAPA_AMI_ID_MAX, given);
	else
		r = capa_ami_lookup(&c, CAPA_AMI_UBUNTU_OWNER, CAPA_AMI_BASTION_NAME, "x86_64", ami,
				    CAPA_AMI_ID_MAX);
	if (r < 0)
		return r;
	if ((r = bastion_token(s, token, sizeof(token))) < 0) {
		str_printf(s->err, sizeof(s->err), "the AWSCluster has no UID for a client token");
		return r;
	}
	snprintf(name, sizeof(name), "%s-bastion", s->name);
	if ((r = capa_net_tags(s, &t, BASTION_ROLE, name)) < 0)
		goto out;
	aws_query_add(&q, "ImageId", ami);
	aws_query_add(&q, "InstanceType", type);
	aws_query_add(&q, "MinCount", "1");
	aws_query_add(&q, "MaxCount", "1");
	aws_query_add(&q, "ClientToken", token);
	if (key)
		aws_query_add(&q, "KeyName", key);
	aws_query_add(&q, "NetworkInterface.1.DeviceIndex", "0");
	aws_query_add(&q, "NetworkInterface.1.SubnetId", sid);
	aws_query_add(&q, "NetworkInterface.1.SecurityGroupId.1", sg);
	aws_query_add_bool(&q, "NetworkInterface.1.AssociatePublicIpAddress", true);
	if ((r = capa_query_tagspec(&q, 1, "instance", &t)) < 0 ||
	    (r = capa_query_tagspec(&q, 2, "volume", &t)) < 0) {
		str_printf(s->err, sizeof(s->err), "RunInstances: cannot build the request");
		goto out;
	}
	if ((r = run_once(s, &q, &rep)) < 0)
		goto out;
	xmlNode *item = aws_xml_list(rep.result, "instancesSet");
	if (!item || (r = ec2_instance_parse(item, ret)) < 0) {
		str_printf(s->err, sizeof(s->err), "RunInstances: no usable instance in the reply");
		r = -EBADMSG;
		goto out;
	}
	log_info("created the bastion host", KV_S("cluster", s->name), KV_S("instance", ret->id),
		 KV_S("subnet", sid), KV_S("type", type), KV_S("ami", ami));
out:
	capa_tags_release(&t);
	aws_reply_release(&rep);
	aws_query_release(&q);
	return r;
}

/* Terminates the bastion (when there is one) and waits for it to be terminated. */
static int bastion_terminate(struct capa_scope *s)
{
	struct ec2_instance i = {0};
	int r = bastion_find(s, NULL, &i);

	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	capa_scope_condition(s, CAPA_COND_BASTION, false, "Deleting");
	if (strcmp(i.state, "shutting-down") != 0) {
		struct aws_query q = AWS_QUERY_INIT;
		struct aws_reply rep = {0};
		aws_query_add(&q, "InstanceId.1", i.id);
		r = capa_net_create(s, "TerminateInstances", &q, NULL, NULL, &rep);
		aws_reply_release(&rep);
		aws_query_release(&q);
		if (r < 0)
			goto out;
		log_info("terminating the bastion host", KV_S("cluster", s->name),
			 KV_S("instance", i.id));
	}
	for (int64_t end = now_mono_ns() + TERMINATE_WAIT_NS;;) {
		struct ec2_instance now = {0};
		char id[64];
		capa_strcpy(id, sizeof(id), i.id);
		r = bastion_find(s, id, &now);
		bool done = r == -ENOENT || (r >= 0 && strcmp(now.state, "terminated") == 0);
		ec2_instance_release(&now);
		if (done) {
			r = 0;
			break;
		}
		if (r < 0)
			goto out;
		if (now_mono_ns() > end) {
			str_printf(s->err, sizeof(s->err),
				   "the bastion %s is not terminated after 2 minutes", id);
			r = -ETIMEDOUT;
			goto out;
		}
		if (cancel_wait(s->x->cancel, TERMINATE_POLL_NS)) {
			r = -ECANCELED;
			goto out;
		}
	}
	log_info("the bastion host is terminated", KV_S("cluster", s->name), KV_S("instance", i.id));
out:
	ec2_instance_release(&i);
	return r;
}

/* Terminated, status.bastion dropped, BastionHostReady False/Deleted (as CAPA's DeleteBastion). */
static int bastion_remove(struct capa_scope *s)
{
	int r = bastion_terminate(s);
	cJSON *st = capa_scope_status(s);

	if (r < 0) {
		capa_scope_condition(s, CAPA_COND_BASTION, false, "DeletingFailed");
		return r;
	}
	if (st && cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(st, "bastion"))) {
		/* null: the status write is a merge patch, which drops the field */
		json_put(st, "bastion", cJSON_CreateNull());
		capa_condition_set(st, CAPA_COND_BASTION, "False", "Info", "Deleted", NULL);
	}
	return 0;
}

int capa_bastion_reconcile(struct capa_scope *s)
{
	struct ec2_instance i = {0};
	char ami[CAPA_AMI_ID_MAX] = "";
	const char *sg = json_str(s->obj, "status.networkStatus.securityGroups.bastion.id");
	const char *key = json_str(s->obj, "spec.sshKeyName");
	bool priv;
	int r;

	if (!capa_bastion_enabled(s))
		return bastion_remove(s);
	const cJSON *pub = first_public(s, &priv);
	if (!pub || !priv) {
		log_info("no private or no public subnet: skipping the bastion host",
			 KV_S("cluster", s->name));
		return 0;
	}
	if (!key)
		key = "default";
	else if (!*key)
		key = NULL;
	if (!sg || !*sg) {
		str_printf(s->err, sizeof(s->err), "the bastion security group is not made yet");
		r = -ENOENT;
		goto out;
	}
	r = bastion_find(s, NULL, &i);
	if (r == -ENOENT) {
		capa_scope_condition(s, CAPA_COND_BASTION, false, "BastionCreationStarted");
		if ((r = bastion_create(s, pub, sg, key, ami, &i)) < 0)
			goto out;
		/* the create answers "pending" without addresses: read it back once */
		struct ec2_instance again = {0};
		char id[64];
		capa_strcpy(id, sizeof(id), i.id);
		if (bastion_find(s, id, &again) >= 0) {
			ec2_instance_release(&i);
			i = again;
		}
	}
	if (r < 0)
		goto out;
	r = bastion_status(s, &i, *ami ? ami : NULL, sg, key);
out:
	capa_scope_condition(s, CAPA_COND_BASTION, r >= 0, "BastionHostFailed");
	ec2_instance_release(&i);
	return r;
}

int capa_bastion_delete(struct capa_scope *s)
{
	return bastion_terminate(s);
}
