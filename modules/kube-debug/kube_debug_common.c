/* kube-debug's options and the helpers every action uses: resources by name, object
 * references, printing results and failures. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/kube/rest.h"
#include "modules/kube-debug/kube_debug_int.h"

struct dbg_opts dbg;

static const struct {
	const char *name;
	const struct kube_resource *res;
} known[] = {
    {"namespaces", &kube_namespaces},
    {"nodes", &kube_nodes},
    {"pods", &kube_pods},
    {"services", &kube_services},
    {"endpoints", &kube_endpoints},
    {"secrets", &kube_secrets},
    {"configmaps", &kube_configmaps},
    {"events", &kube_events},
    {"persistentvolumes", &kube_pvs},
    {"persistentvolumeclaims", &kube_pvcs},
    {"serviceaccounts", &kube_serviceaccounts},
    {"endpointslices", &kube_endpointslices},
    {"leases", &kube_leases},
    {"volumeattachments", &kube_volumeattachments},
    {"csinodes", &kube_csinodes},
    {"csidrivers", &kube_csidrivers},
    {"storageclasses", &kube_storageclasses},
    {"daemonsets", &kube_daemonsets},
    {"deployments", &kube_deployments},
    {"poddisruptionbudgets", &kube_pdbs},
    {"customresourcedefinitions", &kube_crds},
};

int dbg_resource(const char *spec, struct kube_resource *ret)
{
	static char copy[256];
	char *a, *b;

	for (size_t i = 0; i < ARRAY_SIZE(known); i++)
		if (strcmp(spec, known[i].name) == 0) {
			*ret = *known[i].res;
			return 0;
		}
	if (str_copy(copy, sizeof(copy), spec) < 0 || !(a = strchr(copy, '/')) ||
	    !(b = strchr(a + 1, '/')) || strchr(b + 1, '/'))
		return -EINVAL;
	*a = *b = 0;
	*ret = (struct kube_resource){
	    .group = copy, .version = a + 1, .plural = b + 1, .namespaced = !dbg.cluster_scoped};
	return 0;
}

/* "ns/name" or "name" (in --namespace or the context's namespace). */
void dbg_ref(struct kube_client *kc, const struct kube_resource *res, const char *arg,
	     struct kube_ref *ref, char *buf, size_t n)
{
	const char *slash = strchr(arg, '/');

	*ref = (struct kube_ref){.res = res, .name = arg};
	if (!res->namespaced)
		return;
	if (slash && (size_t)(slash - arg) < n) {
		memcpy(buf, arg, (size_t)(slash - arg));
		buf[slash - arg] = 0;
		ref->ns = buf;
		ref->name = slash + 1;
	} else
		ref->ns = dbg.ns ? dbg.ns : kube_client_namespace(kc);
}

int dbg_fail(int r, const struct kube_status *st, const char *what)
{
	printf("error: %s: errno=%s code=%d reason=%s message=\"%s\"\n", what, errno_name(r),
	       st ? st->code : 0, st && st->reason[0] ? st->reason : "-", st ? st->message : "");
	return 1;
}

void dbg_print(const cJSON *v)
{
	_cleanup_free_ char *s = json_print(v);
	puts(s ? s : "null");
}
