/* Queue mode: upstream's gauges nth_tagged_instances (the instances carrying MANAGED_TAG) and
 * nth_tagged_nodes (the Nodes among them, by the instance ID of spec.providerID), every 30 s. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/query.h"
#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/rest.h"
#include "modules/nth/nth.h"
#include "modules/nth/nth_sqs_int.h"

#define GAUGES_PERIOD_NS (30 * 1000000000LL) /* upstream's ticker: 30 s */

typedef char instance_id[32];

struct idset {
	instance_id *v;
	size_t n, cap;
};

static int id_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int on_page(void *ud, const struct aws_reply *page)
{
	struct idset *s = ud;

	for (xmlNode *rs = aws_xml_list(page->result, "reservationSet"); rs; rs = aws_xml_next(rs))
		for (xmlNode *i = aws_xml_list(rs, "instancesSet"); i; i = aws_xml_next(i)) {
			const char *id = aws_xml_text(i, "instanceId");

			if (!id || strlen(id) >= sizeof(instance_id))
				continue;
			if (s->n == s->cap) {
				size_t cap = s->cap ? 2 * s->cap : 64;
				instance_id *v = reallocarray(s->v, cap, sizeof(*v));

				if (!v)
					return -ENOMEM;
				s->v = v;
				s->cap = cap;
			}
			str_copy(s->v[s->n++], sizeof(instance_id), id);
		}
	return 0;
}

/* The instances carrying the managed tag (any value, any state, as upstream's tag-key filter). */
static int tagged_instances(struct aws_client *aws, const char *tag, struct idset *s)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_error err;
	char buf[700];
	int r;

	aws_error_clear(&err);
	if ((r = aws_query_add_filter(&q, "tag-key", &tag, 1)) == 0)
		r = aws_paginate_query(aws, AWS_SVC_EC2, "DescribeInstances", &q,
				       &(struct aws_paginate){ .token_param = "NextToken",
							       .reply_field = "nextToken",
							       .on_page = on_page,
							       .ud = s },
				       &err);
	aws_query_release(&q);
	if (r < 0 && r != -ECANCELED)
		log_v(1, "nth_tagged_instances: DescribeInstances failed",
		      KV_S("error", aws_error_str(&err, buf, sizeof(buf))), KV_E(r));
	return r;
}

struct node_count {
	const struct idset *s;
	long long n;
};

static int on_node(void *ud, cJSON *item)
{
	struct node_count *c = ud;
	const char *pid = json_str(item, "spec.providerID");
	const char *id = pid ? strrchr(pid, '/') : NULL;

	if (id && c->s->n > 0 && bsearch(id + 1, c->s->v, c->s->n, sizeof(*c->s->v), id_cmp))
		c->n++;
	cJSON_Delete(item);
	return 0;
}

static int collect(struct nth *n, struct aws_client *aws, long long *inst, long long *nodes)
{
	struct idset s = {0};
	struct node_count c = {.s = &s};
	struct kube_status st;
	int r;

	if ((r = tagged_instances(aws, n->cfg->managed_tag, &s)) < 0)
		goto out;
	if (s.n > 1)
		qsort(s.v, s.n, sizeof(*s.v), id_cmp);
	*inst = (long long)s.n;
	r = kube_list_each(n->kube, KUBE_REF(&kube_nodes, NULL, NULL), NULL, on_node, &c, NULL, &st);
	if (r < 0 && r != -ECANCELED)
		log_v(1, "nth_tagged_nodes: listing the Nodes failed", KV_S("message", st.message),
		      KV_E(r));
	if (r == 0)
		*nodes = c.n;
out:
	free(s.v);
	return r;
}

struct gauges {
	struct nth *n;
	struct aws_client *aws;
	pthread_t th;
	bool started;
};

static void *gauges_main(void *arg)
{
	struct gauges *g = arg;
	bool failing = false;

	do {
		long long inst = -1, nodes = -1;
		int r = collect(g->n, g->aws, &inst, &nodes);

		if (inst >= 0)
			nth_metric_tagged(inst, nodes);
		if (r < 0 && r != -ECANCELED && !failing)
			log_warn("cannot count the managed instances and their Nodes; the gauges keep "
				 "their last values (logged again after a success)",
				 KV_E(r));
		failing = r < 0;
	} while (!cancel_wait(g->n->cancel, GAUGES_PERIOD_NS));
	return NULL;
}

struct gauges *nth_sqs_gauges_start(struct nth *n, struct aws_client *aws)
{
	struct gauges *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->n = n;
	g->aws = aws;
	if (pthread_create(&g->th, NULL, gauges_main, g) != 0) {
		log_warn("cannot start the gauges' thread: nth_tagged_* stay 0");
		free(g);
		return NULL;
	}
	g->started = true;
	return g;
}

void nth_sqs_gauges_stop(struct gauges *g)
{
	if (!g)
		return;
	if (g->started)
		pthread_join(g->th, NULL); /* it ends on n->cancel */
	free(g);
}
