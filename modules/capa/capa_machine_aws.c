/* The AWSMachine controller's AWS calls: EC2 and Secrets Manager through CAPA's token buckets. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/xml.h"
#include "common/base/base64.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/capa/capa_bootstrap.h"
#include "modules/capa/capa_machine_ctl.h"

static int call(struct capa_mscope *s, enum aws_service svc, const char *action,
		const struct aws_query *q, const char *json, struct aws_reply *rep, int attempts)
{
	struct capa_machine_state *ms = s->ms;
	struct aws_error e = { 0 };
	struct aws_request rq = { .service = svc,
				  .action = action,
				  .query = q,
				  .json = json,
				  .max_attempts = attempts,
				  .region = s->region && *s->region ? s->region : NULL,
				  .cancel = ms->x->cancel };
	int r = capa_aws_do(ms->x, &rq, rep, &e);
	if (r < 0) {
		str_printf(s->err, sizeof(s->err), "%s: %s%s%s", action, e.code, e.code[0] ? ": " : "",
			   e.message);
		/* the caller tells "not found" apart by the code */
		if (svc == AWS_SVC_SECRETSMANAGER && strcmp(e.code, "ResourceExistsException") == 0)
			return -EEXIST;
		if (svc == AWS_SVC_SECRETSMANAGER && strcmp(e.code, "ResourceNotFoundException") == 0)
			return -ENOENT;
	}
	return r;
}

int capa_mach_ec2(struct capa_mscope *s, const char *action, const struct aws_query *q,
		  struct aws_reply *rep, int attempts)
{
	return call(s, AWS_SVC_EC2, action, q, NULL, rep, attempts);
}

int capa_mach_elb(struct capa_mscope *s, enum aws_service svc, const char *action,
		  const struct aws_query *q, struct aws_reply *rep)
{
	return call(s, svc, action, q, NULL, rep, 0);
}

static int sm(struct capa_mscope *s, const char *action, const cJSON *in)
{
	struct aws_reply rep = { 0 };
	char *text = cJSON_PrintUnformatted(in);
	if (!text)
		return -ENOMEM;
	int r = call(s, AWS_SVC_SECRETSMANAGER, action, NULL, text, &rep, 0);
	free(text);
	aws_reply_release(&rep);
	return r;
}

/* ---- instances ---- */

static int first_instance(struct capa_mscope *s, const struct aws_reply *rep,
			  struct ec2_instance *ret)
{
	struct ec2_instance *list = NULL;
	size_t n = 0;
	int r = ec2_instances_parse(rep->result, &list, &n);
	if (r < 0) {
		str_printf(s->err, sizeof(s->err), "an instance in the reply is unusable");
	} else if (n == 0) {
		r = -ENOENT;
	} else {
		if (n > 1)
			log_warn("more than one instance carries the machine's tags: using the first",
				 KV_S("awsmachine", s->m.awsmachine), KV_S("instance", list[0].id),
				 KV_S("other", list[1].id));
		*ret = list[0];
		memset(&list[0], 0, sizeof(list[0]));
	}
	for (size_t i = 0; i < n; i++)
		ec2_instance_release(&list[i]);
	free(list);
	return r;
}

int capa_mach_find_instance(struct capa_mscope *s, struct ec2_instance *ret)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	char id[64] = "";
	const char *sid = json_str(s->m.spec, "instanceID");
	int r;

	if (sid && *sid)
		str_copy(id, sizeof(id), sid);
	else if (json_str(s->m.spec, "providerID"))
		capa_provider_id_parse(json_str(s->m.spec, "providerID"), id, sizeof(id));
	if (*id)
		r = aws_query_add(&q, "InstanceId.1", id);
	else
		r = capa_find_instance_query(&s->m, &q);
	if (r >= 0)
		r = capa_mach_ec2(s, "DescribeInstances", &q, &rep, 0);
	aws_query_release(&q);
	if (r >= 0)
		r = first_instance(s, &rep, ret);
	aws_reply_release(&rep);
	return r;
}

int capa_mach_root_device(struct capa_mscope *s, const char *ami, char *out, size_t n)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	int r = aws_query_add(&q, "ImageId.1", ami);
	if (r >= 0)
		r = capa_mach_ec2(s, "DescribeImages", &q, &rep, 0);
	aws_query_release(&q);
	if (r >= 0) {
		xmlNode *img = aws_xml_list(rep.result, "imagesSet");
		const char *dev = img ? aws_xml_text(img, "rootDeviceName") : NULL;
		if (!dev || !*dev) {
			str_printf(s->err, sizeof(s->err), "DescribeImages: no root device name for %s", ami);
			r = -ENOENT;
		} else {
			r = str_copy(out, n, dev);
		}
	}
	aws_reply_release(&rep);
	return r;
}

static int tag_enis(struct capa_mscope *s, const struct ec2_instance *i)
{
	struct capa_tags t = { 0 };
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	char err[256];
	if (i->n_enis == 0)
		return 0;
	int r = capa_machine_tags(&s->m, true, &t, err, sizeof(err));
	for (size_t k = 0; r >= 0 && k < i->n_enis; k++)
		r = aws_query_addf(&q, i->enis[k].id, "ResourceId.%zu", k + 1);
	if (r >= 0)
		r = aws_query_add_tags(&q, "Tag", (const char *const *)t.key,
				       (const char *const *)t.value, t.n);
	if (r >= 0)
		r = capa_mach_ec2(s, "CreateTags", &q, &rep, 0);
	aws_query_release(&q);
	aws_reply_release(&rep);
	capa_tags_release(&t);
	return r;
}

int capa_mach_run(struct capa_mscope *s, const struct capa_run_args *a, struct ec2_instance *ret)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	int r = capa_run_instances_query(&s->m, a, &q, s->err, sizeof(s->err));
	if (r >= 0)
		r = capa_mach_ec2(s, "RunInstances", &q, &rep, 1);
	aws_query_release(&q);
	if (r >= 0) {
		xmlNode *item = aws_xml_list(rep.result, "instancesSet");
		r = item ? ec2_instance_parse(item, ret) : -EBADMSG;
		if (r < 0)
			str_printf(s->err, sizeof(s->err), "RunInstances: no usable instance in the reply");
	}
	aws_reply_release(&rep);
	if (r >= 0 && tag_enis(s, ret) < 0)
		log_warn("cannot tag the instance's network interfaces", KV_S("instance", ret->id),
			 KV_S("error", s->err));
	return r;
}

int capa_mach_terminate(struct capa_mscope *s, const char *id)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = { 0 };
	int r = aws_query_add(&q, "InstanceId.1", id);
	if (r >= 0)
		r = capa_mach_ec2(s, "TerminateInstances", &q, &rep, 0);
	aws_query_release(&q);
	aws_reply_release(&rep);
	return r;
}

/* ---- Secrets Manager ---- */

static cJSON *secret_tags(struct capa_mscope *s)
{
	struct capa_tags t = { 0 };
	char err[256];
	if (capa_machine_tags(&s->m, false, &t, err, sizeof(err)) < 0)
		return NULL;
	cJSON *arr = cJSON_CreateArray();
	for (size_t i = 0; arr && i < t.n; i++) {
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddStringToObject(o, "Key", t.key[i]) ||
		    !cJSON_AddStringToObject(o, "Value", t.value[i])) {
			cJSON_Delete(o);
			cJSON_Delete(arr);
			arr = NULL;
			break;
		}
		cJSON_AddItemToArray(arr, o);
	}
	capa_tags_release(&t);
	return arr;
}

static int secret_put(struct capa_mscope *s, const char *name, const void *data, size_t len,
		      const cJSON *tags)
{
	_cleanup_free_ char *b64 = NULL;
	int r = base64_encode(data, len, BASE64_STD, &b64);
	if (r < 0)
		return r;
	cJSON *in = cJSON_CreateObject();
	if (!in || !cJSON_AddStringToObject(in, "Name", name) ||
	    !cJSON_AddStringToObject(in, "SecretBinary", b64) ||
	    !cJSON_AddItemToObject(in, "Tags", cJSON_Duplicate(tags, true))) {
		cJSON_Delete(in);
		return -ENOMEM;
	}
	r = sm(s, "CreateSecret", in);
	if (r == -EEXIST) {
		/* left by an interrupted create of this machine (the name comes from its UID):
		 * the value is replaced */
		cJSON *put = cJSON_CreateObject();
		if (!put || !cJSON_AddStringToObject(put, "SecretId", name) ||
		    !cJSON_AddStringToObject(put, "SecretBinary", b64))
			r = -ENOMEM;
		else
			r = sm(s, "PutSecretValue", put);
		cJSON_Delete(put);
	}
	cJSON_Delete(in);
	return r;
}

int capa_mach_secrets_create(struct capa_mscope *s, const char *prefix, const void *gz, size_t len,
			     unsigned *ret_count)
{
	unsigned n = capa_secret_chunks(len);
	char name[CAPA_SECRET_NAME_MAX];
	if (n > CAPA_SECRET_MAX_CHUNKS) {
		str_printf(s->err, sizeof(s->err), "the bootstrap data needs %u secrets (at most %d)",
			   n, CAPA_SECRET_MAX_CHUNKS);
		return -E2BIG;
	}
	cJSON *tags = secret_tags(s);
	if (!tags)
		return -ENOMEM;
	int r = 0;
	for (unsigned i = 0; r >= 0 && i < n; i++) {
		size_t off = (size_t)i * CAPA_SECRET_CHUNK;
		size_t cl = len - off < CAPA_SECRET_CHUNK ? len - off : CAPA_SECRET_CHUNK;
		if ((r = capa_secret_name(prefix, i, name, sizeof(name))) >= 0)
			r = secret_put(s, name, (const char *)gz + off, cl, tags);
	}
	cJSON_Delete(tags);
	if (r >= 0)
		*ret_count = n;
	return r;
}

int capa_mach_secrets_delete(struct capa_mscope *s, const char *prefix, unsigned count)
{
	char name[CAPA_SECRET_NAME_MAX];
	int ret = 0;
	for (unsigned i = 0; i < count && i < CAPA_SECRET_MAX_CHUNKS; i++) {
		cJSON *in = cJSON_CreateObject();
		int r = capa_secret_name(prefix, i, name, sizeof(name));
		if (r >= 0 && (!in || !cJSON_AddStringToObject(in, "SecretId", name) ||
			       !cJSON_AddBoolToObject(in, "ForceDeleteWithoutRecovery", true)))
			r = -ENOMEM;
		if (r >= 0)
			r = sm(s, "DeleteSecret", in);
		cJSON_Delete(in);
		if (r < 0 && r != -ENOENT && ret == 0)
			ret = r;
	}
	return ret;
}

void capa_mach_sm_endpoint(struct capa_mscope *s, char *out, size_t n)
{
	struct aws_endpoint ep;
	*out = 0;
	if (aws_client_endpoint(s->ms->x->aws, AWS_SVC_SECRETSMANAGER, &ep) == 0 && ep.custom)
		str_copy(out, n, ep.url);
}
