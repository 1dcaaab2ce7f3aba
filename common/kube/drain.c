/* kube_drain_node: evictions with PodDisruptionBudget retries, then a wait (drain.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/base/json.h"
#include "common/kube/drain.h"

int kube_drain_node(struct kube_client *c, const char *node, const struct kube_drain_opts *o,
		    struct cancel *ct, struct kube_drain_result *ret)
{
	(void)c;
	(void)o;
	(void)ct;
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->err, sizeof(ret->err), "drain of node \"%s\": not implemented yet",
		 node ? node : "");
	return -EOPNOTSUPP;
}
