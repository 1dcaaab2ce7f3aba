/* The node-lifecycle controller, upstream's semantics exactly (ccm_lifecycle_decide): every
 * --node-monitor-period, each Node whose Ready condition is not True is checked against EC2:
 * its instance gone (not found, or terminated) deletes the Node; stopped adds the
 * node.cloudprovider.kubernetes.io/shutdown:NoSchedule taint (stopping and shutting-down do
 * not). A Ready Node loses that taint.
 *
 * AWS calls per pass: none while every Node is Ready; otherwise the NotReady Nodes' instances
 * by ID, 100 per DescribeInstances. A failed describe deletes nothing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/drain.h"
#include "common/kube/events.h"
#include "common/kube/informer.h"
#include "common/kube/rest.h"
#include "common/kube/workqueue.h"
#include "modules/ccm/ccm_controllers.h"

/* Adds (add true) or removes the shutdown taint (kube_node_taint: a GET/PUT on the Node's
 * resourceVersion, retried on conflict; nothing written when already so). */
static int set_taint(struct ccm *m, const char *name, bool add)
{
	int r;

	if (!ccm_may_act(m))
		return -ECANCELED;
	r = kube_node_taint(m->kc, name, CCM_TAINT_SHUTDOWN, NULL, add ? "NoSchedule" : NULL, add);
	if (r < 0 && r != -ENOENT) {
		log_error(add ? "failed to add the shutdown taint"
			      : "failed to remove the shutdown taint",
			  KV_S("node", name), KV_E(r));
		return r;
	}
	if (r == 0)
		log_info(add ? "added the shutdown taint" : "removed the shutdown taint",
			 KV_S("node", name));
	return 0;
}

static int delete_node(struct ccm *m, const cJSON *node)
{
	const char *name = json_str(node, "metadata.name");
	const char *uid = json_str(node, "metadata.uid");
	struct kube_status st = {0};
	int r;

	if (!ccm_may_act(m))
		return -ECANCELED;
	log_info("deleting node since it is no longer present in cloud provider",
		 KV_S("node", name));
	ccm_node_event(m, node, KUBE_EVENT_NORMAL, "DeletingNode",
		       "Deleting node %s because it does not exist in the cloud provider", name);
	/* the uid precondition: never delete a Node re-created meanwhile under the same name */
	struct kube_delete_opts o = {.precondition_uid = uid};
	r = kube_delete(m->kc, KUBE_REF(&kube_nodes, NULL, name), &o, &st);
	if (r < 0 && r != -ENOENT) {
		log_error("failed to delete node", KV_S("node", name), KV_S("error", st.message),
			  KV_E(r));
		return r;
	}
	return 0;
}

struct notready {
	struct kube_obj *node;
	char id[64];
	bool has_id;
};

/* One pass; its period is *requeue_after's default, kept on a failure: retried with backoff,
 * at the latest after a monitor period, as upstream's loop runs every period whatever
 * happened. */
int ccm_lc_monitor(void *ud, const char *key, int64_t *requeue_after)
{
	struct ccm *m = ud;
	struct kube_obj **objs = NULL;
	struct notready *nr = NULL;
	const char **ids = NULL, **names = NULL;
	struct ec2_instance *inst = NULL;
	size_t n_objs = 0, n_nr = 0, n_ids = 0, n_names = 0, n_inst = 0;
	struct aws_error err = {0};
	unsigned failed = 0;
	int r;

	(void)key;
	(void)requeue_after;
	if ((r = kube_store_list(ccm_node_store(m), &objs, &n_objs)) < 0)
		return r;
	if (n_objs &&
	    (!(nr = calloc(n_objs, sizeof(*nr))) || !(ids = calloc(n_objs, sizeof(*ids))) ||
	     !(names = calloc(n_objs, sizeof(*names))))) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n_objs; i++) {
		const cJSON *n = objs[i]->json;
		const char *name = json_str(n, "metadata.name");
		bool ready = strcmp(ccm_node_ready_status(n), "True") == 0;
		if (!name)
			continue;
		if (ready) {
			if (ccm_node_has_taint(n, CCM_TAINT_SHUTDOWN) &&
			    set_taint(m, name, false) < 0)
				failed++;
			continue;
		}
		struct notready *x = &nr[n_nr];
		int e = ccm_node_instance_id(n, x->id, sizeof(x->id));
		if (e == -ENOTSUP || e == -EINVAL)
			continue; /* another provider's Node (e.g. static://): not ours to judge */
		if (e == -ENOENT) {
			/* no providerID: upstream looks the name up; an uninitialized Node is left
			 * to the cloud-node controller */
			if (ccm_node_has_taint(n, CCM_TAINT_UNINITIALIZED))
				continue;
			struct ccm_node_ref ref = {.name = name};
			if (ccm_node_lookup_id(&ref, x->id, sizeof(x->id)) == 0) {
				x->has_id = true;
				ids[n_ids++] = x->id;
			} else {
				names[n_names++] = name;
			}
		} else {
			x->has_id = true;
			ids[n_ids++] = x->id;
		}
		x->node = objs[i];
		n_nr++;
	}
	if (n_nr == 0)
		goto done;
	if ((r = ccm_cloud_describe_ids(m->cloud, ids, n_ids, &inst, &n_inst, &err)) < 0 ||
	    (r = ccm_cloud_find_by_names(m->cloud, names, n_names, &inst, &n_inst, &err)) < 0) {
		log_error("node lifecycle: describing instances failed", KV_S("error", err.message),
			  KV_E(r));
		/* nothing deleted on a failed call; retried with backoff, at the latest after a
		 * monitor period, as upstream's loop runs every period whatever happened */
		goto out;
	}
	for (size_t i = 0; i < n_nr && ccm_may_act(m); i++) {
		const cJSON *n = nr[i].node->json;
		const char *name = json_str(n, "metadata.name");
		struct ccm_node_ref ref = {.name = name,
					   .provider_id = json_str(n, "spec.providerID")};
		int k = ccm_match_instance(&ref, inst, n_inst, m->cluster_id, NULL);
		if (k == -ENOTUNIQ) {
			log_warn("node lifecycle: several instances match the node; skipped",
				 KV_S("node", name));
			continue;
		}
		const struct ec2_instance *in = k >= 0 ? &inst[k] : NULL;
		bool exists = ccm_instance_exists(in), shutdown = ccm_instance_shutdown(in);
		enum ccm_lifecycle_action a = ccm_lifecycle_decide(
		    false, ccm_node_has_taint(n, CCM_TAINT_SHUTDOWN), exists, shutdown);
		log_v(4, "node lifecycle", KV_S("node", name), KV_B("exists", exists),
		      KV_B("shutdown", shutdown), KV_S("action", ccm_lifecycle_action_name(a)));
		if (a == CCM_LC_DELETE)
			failed += delete_node(m, n) < 0;
		else if (a == CCM_LC_ADD_SHUTDOWN)
			failed += set_taint(m, name, true) < 0;
	}
done:
	r = failed ? -EAGAIN : 0;
out:
	ccm_instances_free(inst, n_inst);
	free(ids);
	free(names);
	free(nr);
	kube_objv_free(objs, n_objs);
	return r;
}

int ccm_lc_start(struct controller *c)
{
	log_info("started the cloud-node-lifecycle controller");
	return 0;
}
