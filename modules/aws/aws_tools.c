/* aws-k8s aws: the imds, batch, creds and endpoint verbs. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/batch.h"
#include "common/aws/xml.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/aws/aws.h"

static int imds_fail(const char *what, int r)
{
	fprintf(stderr, "aws-k8s aws: imds %s failed: %s\n", what,
		r == -ENOENT   ? "not found (404)"
		: r == -ENODEV ? "the metadata service is disabled (AWS_EC2_METADATA_DISABLED)"
			       : strerror(-r));
	return 1;
}

int aws_cmd_imds(struct aws_client *c, int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(struct aws_imds *m, char **ret);
	} helpers[] = {
	    {"instance-id", aws_imds_instance_id},
	    {"instance-type", aws_imds_instance_type},
	    {"zone", aws_imds_zone},
	    {"zone-id", aws_imds_zone_id},
	    {"region", aws_imds_region},
	    {"local-hostname", aws_imds_local_hostname},
	    {"local-ipv4", aws_imds_local_ipv4},
	};
	struct aws_imds *m = aws_client_imds(c);
	int r;

	if (argc < 1) {
		fprintf(stderr, "aws-k8s aws: imds needs a verb: get PATH, identity, macs, ...\n");
		return 2;
	}
	if (strcmp(argv[0], "get") == 0) {
		struct buf b = BUF_INIT(0);
		if (argc != 2) {
			fprintf(stderr, "aws-k8s aws: usage: imds get PATH\n");
			return 2;
		}
		if ((r = aws_imds_get_buf(m, argv[1], &b)) < 0) {
			buf_release(&b);
			return imds_fail(argv[1], r);
		}
		fwrite(b.data ? b.data : "", 1, b.len, stdout);
		if (b.len && b.data[b.len - 1] != '\n')
			fputc('\n', stdout);
		buf_release(&b);
		return 0;
	}
	if (strcmp(argv[0], "identity") == 0) {
		struct aws_imds_identity id;
		cJSON *o;
		if ((r = aws_imds_identity(m, &id)) < 0)
			return imds_fail("identity", r);
		o = cJSON_CreateObject();
		json_set_str(o, "accountId", id.account_id);
		json_set_str(o, "instanceId", id.instance_id);
		json_set_str(o, "instanceType", id.instance_type);
		json_set_str(o, "imageId", id.image_id);
		json_set_str(o, "region", id.region);
		json_set_str(o, "availabilityZone", id.availability_zone);
		json_set_str(o, "privateIp", id.private_ip);
		json_set_str(o, "architecture", id.architecture);
		json_set_str(o, "pendingTime", id.pending_time);
		char *s = cJSON_Print(o);
		if (s)
			puts(s);
		free(s);
		cJSON_Delete(o);
		return 0;
	}
	if (strcmp(argv[0], "macs") == 0) {
		char **macs = NULL;
		if ((r = aws_imds_macs(m, &macs)) < 0)
			return imds_fail("macs", r);
		for (size_t i = 0; macs[i]; i++) {
			_cleanup_free_ char *dev = NULL, *eni = NULL;
			aws_imds_interface(m, macs[i], "device-number", &dev);
			aws_imds_interface(m, macs[i], "interface-id", &eni);
			printf("%s device-number=%s interface-id=%s\n", macs[i], dev ? dev : "?",
			       eni ? eni : "?");
		}
		strv_free(macs);
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(helpers); i++) {
		if (strcmp(argv[0], helpers[i].name) == 0) {
			_cleanup_free_ char *v = NULL;
			if ((r = helpers[i].fn(m, &v)) < 0)
				return imds_fail(argv[0], r);
			puts(v);
			return 0;
		}
	}
	fprintf(stderr, "aws-k8s aws: unknown imds verb '%s'\n", argv[0]);
	return 2;
}

struct ask {
	struct aws_batcher *b;
	const char *id;
	xmlDoc *doc;
	int r;
	struct aws_error err;
	pthread_t t;
};

static void *ask_thread(void *arg)
{
	struct ask *a = arg;

	a->r = aws_batcher_get(a->b, a->id, &a->doc, &a->err);
	return NULL;
}

int aws_cmd_batch(struct aws_client *c, int argc, char **argv, long long window_ms,
		  long long max_ids)
{
	const struct aws_batch_kind *k = argc > 0 ? aws_batch_kind_by_name(argv[0]) : NULL;
	struct aws_batcher_opts o = {.window_ns = window_ms * NSEC_PER_MSEC,
				     .max_ids = (unsigned)max_ids};
	struct aws_batcher *b = NULL;
	struct aws_batcher_stats st;
	struct ask *asks;
	cJSON *out, *items;
	int64_t start;
	size_t n;
	int r, rc = 0, failed = 0, missing = 0;

	if (!k || argc < 2) {
		fprintf(stderr, "aws-k8s aws: usage: batch instances|volumes|snapshots|"
				"volume-modifications ID...\n");
		return 2;
	}
	n = (size_t)argc - 1;
	if (n > 5000) {
		fprintf(stderr, "aws-k8s aws: batch: at most 5000 IDs\n");
		return 2;
	}
	if ((r = aws_batcher_new(c, k, &o, &b)) < 0) {
		fprintf(stderr, "aws-k8s aws: batch: %s\n", strerror(-r));
		return 1;
	}
	asks = calloc(n, sizeof(*asks));
	if (!asks) {
		aws_batcher_free(b);
		return 1;
	}
	start = now_mono_ns();
	for (size_t i = 0; i < n; i++) {
		asks[i].b = b;
		asks[i].id = argv[i + 1];
		if (pthread_create(&asks[i].t, NULL, ask_thread, &asks[i]) != 0) {
			asks[i].r = -EAGAIN;
			asks[i].t = 0;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (asks[i].t)
			pthread_join(asks[i].t, NULL);
	aws_batcher_stats(b, &st);
	out = cJSON_CreateObject();
	items = cJSON_AddObjectToObject(out, "items");
	for (size_t i = 0; i < n; i++) {
		if (asks[i].r == 0) {
			cJSON *v = aws_xml_to_json(xmlDocGetRootElement(asks[i].doc));
			if (v)
				json_put(items, asks[i].id, v);
			xmlFreeDoc(asks[i].doc);
		} else if (asks[i].r == -ENOENT) {
			json_put(items, asks[i].id, cJSON_CreateNull());
			missing++;
		} else {
			char msg[700];
			fprintf(stderr, "aws-k8s aws: batch: %s: %s\n", asks[i].id,
				aws_error_str(&asks[i].err, msg, sizeof(msg)));
			failed++;
		}
	}
	cJSON_AddNumberToObject(out, "asks", (double)st.asks);
	cJSON_AddNumberToObject(out, "batches", (double)st.batches);
	cJSON_AddNumberToObject(out, "calls", (double)st.calls);
	cJSON_AddNumberToObject(out, "maxIdsPerCall", (double)st.max_batch);
	cJSON_AddNumberToObject(out, "notFound", missing);
	cJSON_AddNumberToObject(out, "failed", failed);
	cJSON_AddNumberToObject(out, "seconds", (double)(now_mono_ns() - start) / 1e9);
	{
		char *s = cJSON_Print(out);
		if (s)
			puts(s);
		free(s);
	}
	cJSON_Delete(out);
	free(asks);
	aws_batcher_free(b);
	if (failed)
		rc = 1;
	return rc;
}

int aws_cmd_creds(struct aws_client *c)
{
	struct aws_credentials cr = {0};
	struct aws_creds *p = aws_client_creds(c);
	int r = aws_creds_get(p, &cr);
	char exp[40] = "never";
	size_t l;

	if (r < 0) {
		fprintf(stderr, "aws-k8s aws: no usable credentials: %s\n",
			r == -ENOKEY ? "none configured" : strerror(-r));
		return 1;
	}
	if (cr.expiration_ns)
		rfc3339_format(cr.expiration_ns, 0, exp, sizeof(exp));
	l = strlen(cr.access_key_id);
	/* the key ID is not a secret, but only its start and end are shown anyway */
	printf("{\"source\": \"%s\", \"accessKeyId\": \"%.4s...%s\", \"sessionToken\": %s, "
	       "\"expiration\": \"%s\", \"fetches\": %u}\n",
	       aws_creds_source_name(aws_creds_source(p)), cr.access_key_id,
	       l > 8 ? cr.access_key_id + l - 4 : "", cr.session_token ? "true" : "false", exp,
	       aws_creds_fetch_count(p));
	aws_credentials_release(&cr);
	return 0;
}

int aws_cmd_endpoint(struct aws_client *c, int argc, char **argv)
{
	const struct aws_service_info *si = argc == 1 ? aws_service_by_name(argv[0]) : NULL;
	struct aws_endpoint ep;
	int r;

	if (!si) {
		fprintf(stderr, "aws-k8s aws: usage: endpoint SERVICE\n");
		return 2;
	}
	if ((r = aws_client_endpoint(c, si->id, &ep)) < 0) {
		fprintf(stderr, "aws-k8s aws: no endpoint for %s: %s\n", si->name,
			r == -EDESTADDRREQ ? "the region is not known" : strerror(-r));
		return 1;
	}
	printf("{\"service\": \"%s\", \"url\": \"%s\", \"signingRegion\": \"%s\", "
	       "\"signingName\": \"%s\", \"custom\": %s}\n",
	       si->name, ep.url, ep.signing_region, ep.signing_name, ep.custom ? "true" : "false");
	return 0;
}
