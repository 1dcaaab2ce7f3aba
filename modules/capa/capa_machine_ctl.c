/* The AWSMachine controller, its Kubernetes side (controllers/awsmachine_controller.go): the
 * informers (AWSMachine, Machine; AWSCluster changes queue the machines of the namespace), the
 * owner Machine, Cluster and AWSCluster, the pause, the finalizer, the bootstrap Secret, and
 * the writes of spec (providerID, instanceID, cloudInit.secretPrefix/secretCount) and status
 * (instanceState, ready, addresses, conditions, failureReason/failureMessage).
 *
 * Create (reference capa.md §9-§11): wait for the cluster's infrastructure and the bootstrap
 * data; look the instance up (by id, else by CAPA's tags); add the finalizer; with none, store
 * the bootstrap data (Secrets Manager chunks named from the AWSMachine's UID, recorded in the
 * spec before RunInstances, so that a controller killed at any point finds or deletes them)
 * and call RunInstances once with a ClientToken derived from the UID (EC2 answers a repeated
 * token with the same instance); record providerID; map the state. A pending instance is
 * looked at again after 1 s. An instance terminated behind the controller's back sets the
 * terminal failureReason UpdateError, and is never replaced here (Cluster API replaces the
 * Machine). Delete: the secrets, then TerminateInstances, then the finalizer once the
 * instance is terminated (or gone). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/base64.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/kube/informer.h"
#include "common/kube/store.h"
#include "modules/capa/capa_ami.h"
#include "modules/capa/capa_bootstrap.h"
#include "modules/capa/capa_machine_ctl.h"

#define PENDING_REQUEUE_NS NSEC_PER_SEC
#define TERMINATE_POLL_NS (5 * NSEC_PER_SEC)
#define BOOTSTRAP_SECRET_MAX (1u << 20)

static struct capa_machine_state *machine_state;

/* ---- informers ---- */

static void queue_awsmachine(void *ud, const cJSON *obj)
{
	struct capa_machine_state *ms = ud;
	char key[KUBE_KEY_MAX];
	if (kube_obj_key(obj, key, sizeof(key)) == 0)
		controller_add(ms->c, key);
}

static void on_am_update(void *ud, const cJSON *old, const cJSON *obj)
{
	(void)old;
	queue_awsmachine(ud, obj);
}

/* A Machine's change queues the AWSMachine of its spec.infrastructureRef. */
static void queue_machine_infra(void *ud, const cJSON *machine)
{
	struct capa_machine_state *ms = ud;
	const char *kind = json_str(machine, "spec.infrastructureRef.kind");
	const char *name = json_str(machine, "spec.infrastructureRef.name");
	const char *ns = json_str(machine, "metadata.namespace");
	char key[KUBE_KEY_MAX];
	if (kind && strcmp(kind, "AWSMachine") == 0 && name && ns &&
	    str_printf(key, sizeof(key), "%s/%s", ns, name) >= 0)
		controller_add(ms->c, key);
}

static void on_m_update(void *ud, const cJSON *old, const cJSON *obj)
{
	(void)old;
	queue_machine_infra(ud, obj);
}

/* An AWSCluster changed (became ready, got its groups): its namespace's machines go again. */
static void on_awscluster(void *ud, const cJSON *awscluster)
{
	struct capa_machine_state *ms = ud;
	const char *ns = json_str(awscluster, "metadata.namespace");
	struct kube_obj **v = NULL;
	size_t n = 0;
	if (!ns || !ms->awsmachines ||
	    kube_store_list(kube_informer_store(ms->awsmachines), &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		const char *mns = json_str(v[i]->json, "metadata.namespace");
		if (mns && strcmp(mns, ns) == 0)
			queue_awsmachine(ms, v[i]->json);
	}
	kube_objv_free(v, n);
}

/* ---- reading the owners ---- */

static const char *owner_machine_name(const cJSON *obj)
{
	const cJSON *ref;
	cJSON_ArrayForEach(ref, json_find(obj, "metadata.ownerReferences"))
	{
		const char *kind = json_str(ref, "kind"), *api = json_str(ref, "apiVersion");
		if (kind && api && strcmp(kind, "Machine") == 0 &&
		    str_has_prefix(api, "cluster.x-k8s.io/"))
			return json_str(ref, "name");
	}
	return NULL;
}

static cJSON *status_of(cJSON *obj)
{
	cJSON *st = cJSON_GetObjectItemCaseSensitive(obj, "status");
	if (!cJSON_IsObject(st)) {
		cJSON_DeleteItemFromObjectCaseSensitive(obj, "status");
		st = cJSON_AddObjectToObject(obj, "status");
	}
	return st;
}

static cJSON *spec_of(cJSON *obj)
{
	cJSON *sp = cJSON_GetObjectItemCaseSensitive(obj, "spec");
	if (!cJSON_IsObject(sp)) {
		cJSON_DeleteItemFromObjectCaseSensitive(obj, "spec");
		sp = cJSON_AddObjectToObject(obj, "spec");
	}
	return sp;
}

/* Writes obj's part ("spec" or "status") as a merge patch when it changed. */
static int write_changed(struct capa_mscope *s, const cJSON *stored, const char *part)
{
	const cJSON *now = cJSON_GetObjectItemCaseSensitive(s->obj, part);
	if (!now || cJSON_Compare(now, cJSON_GetObjectItemCaseSensitive(stored, part), true))
		return 0;
	cJSON *patch = cJSON_CreateObject();
	if (!patch || !cJSON_AddItemToObject(patch, part, cJSON_Duplicate(now, true))) {
		cJSON_Delete(patch);
		return -ENOMEM;
	}
	char *text = cJSON_PrintUnformatted(patch);
	cJSON_Delete(patch);
	if (!text)
		return -ENOMEM;
	struct kube_status st = { 0 };
	const char *sub = strcmp(part, "status") == 0 ? "status" : NULL;
	int r = kube_patch(s->ms->x->kc,
			   KUBE_REF_SUB(&capa_awsmachines, json_str(stored, "metadata.namespace"),
					json_str(stored, "metadata.name"), sub),
			   KUBE_PATCH_MERGE, text, NULL, &st);
	free(text);
	if (r < 0)
		log_error("cannot write the AWSMachine", KV_S("part", part),
			  KV_S("awsmachine", s->m.awsmachine), KV_S("error", st.message), KV_E(r));
	return r;
}

static void condition(struct capa_mscope *s, const char *type, const char *st, const char *sev,
		      const char *reason, const char *msg)
{
	cJSON *status = status_of(s->obj);
	if (status)
		capa_condition_set(status, type, st, sev, reason, msg);
}

/* The bootstrap data: the Secret named by the Machine's spec.bootstrap.dataSecretName, key
 * "value" (base64 in the API). */
static int bootstrap_data(struct capa_mscope *s, const char *ns, const char *name, void **ret,
			  size_t *ret_len)
{
	cJSON *secret = NULL;
	struct kube_status st = { 0 };
	int r = kube_get(s->ms->x->kc, KUBE_REF(&kube_secrets, ns, name), &secret, &st);
	if (r < 0) {
		str_printf(s->err, sizeof(s->err), "cannot read the bootstrap Secret %s/%s: %s", ns, name,
			   st.message);
		return r;
	}
	const char *v = json_str(secret, "data.value");
	if (!v) {
		str_printf(s->err, sizeof(s->err), "the bootstrap Secret %s/%s has no key \"value\"", ns,
			   name);
		r = -ENOENT;
	} else if (strlen(v) > BOOTSTRAP_SECRET_MAX * 4 / 3 + 4) {
		str_printf(s->err, sizeof(s->err), "the bootstrap data of %s/%s is over %u bytes", ns,
			   name, BOOTSTRAP_SECRET_MAX);
		r = -E2BIG;
	} else {
		r = base64_decode(v, strlen(v), BASE64_STD, ret, ret_len);
	}
	cJSON_Delete(secret);
	return r;
}

/* The user data of a new instance (base64, as RunInstances takes it): the secrets and the
 * boothook, or the gzipped data itself with cloudInit.insecureSkipSecretsManager. */
static int user_data(struct capa_mscope *s, const char *ns, const char *secret_name, char **ret)
{
	_cleanup_free_ void *data = NULL;
	_cleanup_buf_ struct buf gz = BUF_INIT(0), ud = BUF_INIT(0);
	size_t len = 0;
	bool skip_sm = cJSON_IsTrue(json_find(s->m.spec, "cloudInit.insecureSkipSecretsManager"));
	const char *backend = json_str(s->m.spec, "cloudInit.secureSecretsBackend");
	/* only the Secrets Manager backend is built: another one is refused, never swapped */
	if (!skip_sm && backend && *backend && strcmp(backend, "secrets-manager") != 0) {
		str_printf(s->err, sizeof(s->err),
			   "cloudInit.secureSecretsBackend \"%.64s\" is not supported (only "
			   "secrets-manager)",
			   backend);
		return -EOPNOTSUPP;
	}
	int r = bootstrap_data(s, ns, secret_name, &data, &len);
	if (r < 0)
		return r;
	bool uncompressed = cJSON_IsTrue(json_find(s->m.spec, "uncompressedUserData"));
	if (skip_sm && uncompressed)
		return base64_encode(data, len, BASE64_STD, ret);
	if ((r = capa_gzip(data, len, &gz)) < 0)
		return r;
	if (skip_sm)
		return base64_encode(gz.data, gz.len, BASE64_STD, ret);

	char prefix[CAPA_SECRET_NAME_MAX], endpoint[512];
	const char *given = json_str(s->m.spec, "cloudInit.secretPrefix");
	unsigned count = 0;
	if (given && *given)
		r = str_copy(prefix, sizeof(prefix), given);
	else
		r = capa_secret_prefix(s->m.uid, prefix, sizeof(prefix));
	if (r < 0 || capa_secret_prefix_check(prefix) < 0) {
		str_printf(s->err, sizeof(s->err), "unusable secret prefix \"%.80s\"", prefix);
		return -EINVAL;
	}
	/* written before the secrets exist: a delete after a crash finds them */
	cJSON *sp = spec_of(s->obj);
	json_set_str(sp, "cloudInit.secretPrefix", prefix);
	json_set_number(sp, "cloudInit.secretCount", capa_secret_chunks(gz.len));
	if ((r = write_changed(s, s->stored, "spec")) < 0) {
		str_printf(s->err, sizeof(s->err), "cannot record spec.cloudInit before the secrets");
		return r;
	}
	if ((r = capa_mach_secrets_create(s, prefix, gz.data, gz.len, &count)) < 0)
		return r;
	capa_mach_sm_endpoint(s, endpoint, sizeof(endpoint));
	if ((r = capa_boothook_userdata(prefix, count, s->region ? s->region : "us-east-1", endpoint,
					&ud)) < 0) {
		str_printf(s->err, sizeof(s->err), "cannot build the boothook user data");
		return r;
	}
	return base64_encode(ud.data, ud.len, BASE64_STD, ret);
}

static void delete_secrets(struct capa_mscope *s)
{
	const char *prefix = json_str(s->obj, "spec.cloudInit.secretPrefix");
	long long count = 0;
	if (!prefix || !*prefix || json_get_int(s->obj, "spec.cloudInit.secretCount", &count) < 0 ||
	    count <= 0)
		return;
	if (capa_mach_secrets_delete(s, prefix, (unsigned)count) < 0) {
		log_error("cannot delete the bootstrap secrets", KV_S("awsmachine", s->m.awsmachine),
			  KV_S("error", s->err));
		return;
	}
	json_set_number(spec_of(s->obj), "cloudInit.secretCount", 0);
	log_info("deleted the bootstrap secrets", KV_S("awsmachine", s->m.awsmachine),
		 KV_S("prefix", prefix), KV_I("count", count));
}

/* The instance's state into spec and status. */
static void record_instance(struct capa_mscope *s, const struct ec2_instance *i, int64_t *requeue)
{
	char pid[256];
	struct capa_instance_status is;
	cJSON *sp = spec_of(s->obj), *st = status_of(s->obj);
	if (capa_provider_id(i->zone, i->id, pid, sizeof(pid)) >= 0 && !json_str(sp, "providerID"))
		json_set_str(sp, "providerID", pid);
	json_set_str(sp, "instanceID", i->id);
	json_set_str(st, "instanceState", i->state);
	capa_instance_status(i->state, &is);
	json_set_bool(st, "ready", is.ready);
	if (json_find(s->m.spec, "spotMarketOptions"))
		json_set_bool(st, "interruptible", true);
	cJSON *addrs = capa_instance_addresses(i);
	if (addrs)
		json_put(st, "addresses", addrs);
	condition(s, "InstanceReady", is.cond_status, is.cond_severity, is.cond_reason,
		  is.ready ? NULL : i->state);
	if (is.terminal && !json_str(st, "failureReason")) {
		char msg[128];
		str_printf(msg, sizeof(msg), "EC2 instance state \"%s\" is unexpected", i->state);
		json_set_str(st, "failureReason", is.failure_reason);
		json_set_str(st, "failureMessage", msg);
		log_warn("the instance was terminated outside the controller",
			 KV_S("awsmachine", s->m.awsmachine), KV_S("instance", i->id));
	}
	if (is.requeue_fast)
		*requeue = PENDING_REQUEUE_NS;
}

static int create_instance(struct capa_mscope *s, const cJSON *machine, struct ec2_instance *ret)
{
	const char *ns = json_str(s->obj, "metadata.namespace");
	const char *secret = json_str(machine, "spec.bootstrap.dataSecretName");
	const char *fd = json_str(machine, "spec.failureDomain");
	const char *sgs[CAPA_MAX_SGS];
	struct capa_run_args a = { .sg_ids = sgs };
	char root[64] = "", ami[CAPA_AMI_ID_MAX] = "";
	_cleanup_free_ char *ud = NULL;
	int r;

	if ((r = capa_pick_subnet(&s->m, fd, &a.subnet_id, s->err, sizeof(s->err))) < 0 ||
	    (r = capa_machine_sgs(&s->m, sgs, &a.n_sgs, s->err, sizeof(s->err))) < 0)
		return r;
	/* the image first: a machine without one makes no secret and no instance */
	if ((r = capa_mach_ami(s, machine, ami, sizeof(ami))) < 0)
		return r;
	a.ami = ami;
	if (json_find(s->m.spec, "rootVolume") &&
	    (r = capa_mach_root_device(s, ami, root, sizeof(root))) < 0)
		return r;
	a.root_device = root;
	condition(s, "InstanceReady", "False", "Info", "InstanceProvisionStarted", NULL);
	if ((r = user_data(s, ns, secret, &ud)) < 0)
		return r;
	a.user_data_b64 = ud;
	if ((r = capa_mach_run(s, &a, ret)) < 0)
		return r;
	log_info("created the instance", KV_S("awsmachine", s->m.awsmachine),
		 KV_S("instance", ret->id), KV_S("zone", ret->zone), KV_S("subnet", a.subnet_id));
	return 0;
}

static int reconcile_delete(struct capa_mscope *s, const cJSON *stored, int64_t *requeue)
{
	struct ec2_instance i = { 0 };
	delete_secrets(s);
	int r = capa_mach_find_instance(s, &i);
	if (r == -ENOENT || (r >= 0 && strcmp(i.state, "terminated") == 0)) {
		ec2_instance_release(&i);
		write_changed(s, stored, "spec");
		r = capa_finalizer_remove(s->ms->x, &capa_awsmachines, stored, CAPA_MACHINE_FINALIZER);
		if (r >= 0)
			log_info("AWSMachine deleted", KV_S("awsmachine", s->m.awsmachine));
		return r;
	}
	if (r < 0)
		return r;
	if (strcmp(i.state, "shutting-down") != 0) {
		if ((r = capa_machine_lb_detach(s, &i)) < 0 || (r = capa_mach_terminate(s, i.id)) < 0) {
			ec2_instance_release(&i);
			write_changed(s, stored, "status");
			return r;
		}
		log_info("terminating the instance", KV_S("awsmachine", s->m.awsmachine),
			 KV_S("instance", i.id));
	}
	ec2_instance_release(&i);
	condition(s, "InstanceReady", "False", "Info", "Deleting", NULL);
	write_changed(s, stored, "spec");
	write_changed(s, stored, "status");
	*requeue = TERMINATE_POLL_NS;
	return 0;
}

static bool infra_ready(const cJSON *cluster, const cJSON *awscluster)
{
	return cJSON_IsTrue(json_find(cluster, "status.infrastructureReady")) ||
	       cJSON_IsTrue(json_find(awscluster, "status.ready"));
}

static int reconcile_normal(struct capa_mscope *s, const cJSON *stored, const cJSON *machine,
			    const cJSON *cluster, int64_t *requeue)
{
	struct ec2_instance i = { 0 };
	int r;

	if (json_str(stored, "status.failureReason")) {
		delete_secrets(s); /* a failed machine keeps nothing secret around */
		return write_changed(s, stored, "spec");
	}
	if (!infra_ready(cluster, s->m.awscluster)) {
		log_info("Cluster infrastructure is not ready yet", KV_S("awsmachine", s->m.awsmachine));
		condition(s, "InstanceReady", "False", "Info", "WaitingForClusterInfrastructure", NULL);
		return write_changed(s, stored, "status");
	}
	if (!json_str(machine, "spec.bootstrap.dataSecretName")) {
		log_info("Bootstrap data secret reference is not yet available",
			 KV_S("awsmachine", s->m.awsmachine));
		condition(s, "InstanceReady", "False", "Info", "WaitingForBootstrapData", NULL);
		return write_changed(s, stored, "status");
	}
	/* No duplicate: this lookup (by id, else by CAPA's tags) covers a restart once EC2 shows the
	 * instance; for one EC2 does not show yet (eventual consistency, a lost RunInstances reply),
	 * the guarantee rests on EC2's ClientToken idempotency (the same token and request return
	 * the same instance), which moto 5.2.1 does not implement, so the tests cannot prove it. */
	r = capa_mach_find_instance(s, &i);
	const char *recorded = json_str(s->m.spec, "instanceID");
	if (!recorded)
		recorded = json_str(s->m.spec, "providerID");
	if (r == -ENOENT && recorded) {
		/* the recorded instance (by instanceID, else providerID, as CAPA's findInstance) is
		 * gone: reported, never replaced here */
		condition(s, "InstanceReady", "Unknown", "Warning", "InstanceNotFound", s->err);
		write_changed(s, stored, "status");
		str_printf(s->err, sizeof(s->err), "the instance %s is not found", recorded);
		return -ENOENT;
	}
	if (r < 0 && r != -ENOENT)
		return r;
	if (!capa_has_finalizer(stored, CAPA_MACHINE_FINALIZER) &&
	    (r = capa_finalizer_add(s->ms->x, &capa_awsmachines, stored, CAPA_MACHINE_FINALIZER)) < 0)
		goto out;
	if (!i.id) {
		r = create_instance(s, machine, &i);
		if (r < 0) {
			condition(s, "InstanceReady", "False", "Error", "InstanceProvisionFailed", s->err);
			write_changed(s, stored, "spec");
			write_changed(s, stored, "status");
			goto out;
		}
	}
	record_instance(s, &i, requeue);
	int lb = capa_machine_lb_attach(s, &i);
	if (json_find(machine, "status.nodeRef") || strcmp(i.state, "terminated") == 0)
		delete_secrets(s);
	/* the spec first: the instance is recorded even when the status write fails */
	if ((r = write_changed(s, stored, "spec")) >= 0)
		r = write_changed(s, stored, "status");
	if (r >= 0 && lb < 0)
		r = lb;
out:
	ec2_instance_release(&i);
	return r;
}

static int reconcile(void *ud, const char *key, int64_t *requeue_after_ns)
{
	struct capa_machine_state *ms = ud;
	struct capa_ctx *x = ms->x;
	struct kube_obj *o = NULL, *mo = NULL, *aco = NULL;
	cJSON *cluster = NULL;
	struct capa_mscope s = { .ms = ms };
	char mkey[KUBE_KEY_MAX], ackey[KUBE_KEY_MAX];
	int r = 0;

	if (kube_store_get(kube_informer_store(ms->awsmachines), key, &o) < 0)
		return 0;
	const cJSON *stored = o->json;
	const char *ns = json_str(stored, "metadata.namespace");
	bool deleting = json_find(stored, "metadata.deletionTimestamp") != NULL;
	if (deleting && !capa_has_finalizer(stored, CAPA_MACHINE_FINALIZER))
		goto out;
	const char *mname = owner_machine_name(stored);
	if (!mname || str_printf(mkey, sizeof(mkey), "%s/%s", ns, mname) < 0 ||
	    kube_store_get(kube_informer_store(ms->machines), mkey, &mo) < 0) {
		log_info("Machine Controller has not yet set OwnerRef", KV_S("awsmachine", key));
		goto out;
	}
	const cJSON *machine = mo->json;
	const char *cname = json_str(machine, "spec.clusterName");
	if (!cname)
		cname = json_str_key(json_find(machine, "metadata.labels"), CAPA_CLUSTER_NAME_LABEL);
	struct kube_status kst = { 0 };
	if (!cname ||
	    (r = kube_get(x->kc, KUBE_REF(&capa_clusters, ns, cname), &cluster, &kst)) < 0) {
		log_info("Machine is missing cluster label or cluster does not exist",
			 KV_S("awsmachine", key), KV_S("error", kst.message));
		r = r == -ENOENT ? 0 : r;
		goto out;
	}
	if (capa_is_paused(cluster, stored)) {
		log_info("AWSMachine or linked Cluster is marked as paused. Won't reconcile",
			 KV_S("awsmachine", key));
		goto out;
	}
	const char *acname = json_str(cluster, "spec.infrastructureRef.name");
	if (!acname || str_printf(ackey, sizeof(ackey), "%s/%s", ns, acname) < 0 || !x->awsclusters ||
	    kube_store_get(kube_informer_store(x->awsclusters), ackey, &aco) < 0) {
		log_info("AWSCluster is not available yet", KV_S("awsmachine", key));
		goto out;
	}
	r = controllers_may_act(&x->run) ? 0 : -ECANCELED;
	if (r == 0 && !(s.obj = cJSON_Duplicate(stored, true)))
		r = -ENOMEM;
	if (r < 0)
		goto out;
	const cJSON *labels = json_find(machine, "metadata.labels");
	s.m = (struct capa_machine_ctx){
		.cluster = cname,
		.namespace = ns,
		.awsmachine = json_str(stored, "metadata.name"),
		.uid = json_str(stored, "metadata.uid"),
		.machine = mname,
		.role = labels && cJSON_GetObjectItemCaseSensitive(labels, "cluster.x-k8s.io/control-plane")
			    ? "control-plane"
			    : "node",
		.spec = json_find(s.obj, "spec"),
		.awscluster = aco->json,
	};
	s.region = json_str(aco->json, "spec.region");
	s.stored = stored;
	if (deleting)
		r = reconcile_delete(&s, stored, requeue_after_ns);
	else {
		*requeue_after_ns = x->sync_period_ns;
		r = reconcile_normal(&s, stored, machine, cluster, requeue_after_ns);
	}
	if (r < 0 && r != -ECANCELED) {
		log_error("cannot reconcile the AWSMachine", KV_S("awsmachine", key),
			  KV_S("error", s.err), KV_E(r));
		*requeue_after_ns = 0;
	}
out:
	cJSON_Delete(s.obj);
	cJSON_Delete(cluster);
	kube_obj_unref(aco);
	kube_obj_unref(mo);
	kube_obj_unref(o);
	return r;
}

/* The informers' first list happened before the workers ran: every AWSMachine goes once. */
static int queue_all(struct controller *c)
{
	struct capa_machine_state *ms = c->ud;
	struct kube_obj **v = NULL;
	size_t n = 0;
	int r = kube_store_list(kube_informer_store(ms->awsmachines), &v, &n);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++)
		queue_awsmachine(ms, v[i]->json);
	kube_objv_free(v, n);
	log_info("Starting workers", KV_S("controller", "awsmachine"), KV_U("awsmachines", n));
	return 0;
}

int capa_machine_controller_start(struct capa_ctx *x)
{
	struct capa_machine_state *ms = calloc(1, sizeof(*ms));
	int r;
	if (!ms)
		return -ENOMEM;
	ms->x = x;
	machine_state = ms;
	r = capa_controller_add(
	    x,
	    &(struct controller){
		.name = "awsmachine",
		.reconcile = reconcile,
		.ud = ms,
		.workers = x->machine_workers,
		.start = queue_all,
		.queue = { .base_delay_ns = NSEC_PER_SEC, .max_delay_ns = 300 * NSEC_PER_SEC },
	    },
	    &ms->c);
	if (r < 0)
		return r;
	/* --watch-filter: only the objects labelled with it, selected by the API server */
	char selector[320] = "";
	if (x->watch_filter &&
	    str_printf(selector, sizeof(selector), "%s=%s", CAPA_WATCH_LABEL, x->watch_filter) < 0)
		return -EINVAL;
	struct kube_informer_opts io = {
		.res = &capa_awsmachines,
		.ns = x->namespace,
		.label_selector = *selector ? selector : NULL,
		.handlers = { .on_add = queue_awsmachine, .on_update = on_am_update, .ud = ms },
		.name = "awsmachines",
		.cancel = x->cancel,
	};
	if ((r = kube_informer_new(x->kc, &io, &ms->awsmachines)) < 0)
		return r;
	io.res = &capa_machines;
	io.name = "machines";
	io.handlers = (struct kube_handlers){ .on_add = queue_machine_infra,
					      .on_update = on_m_update,
					      .ud = ms };
	if ((r = kube_informer_new(x->kc, &io, &ms->machines)) < 0)
		return r;
	ms->c->informers[0] = ms->awsmachines;
	ms->c->informers[1] = ms->machines;
	ms->c->informers[2] = x->awsclusters;
	return capa_cluster_watch(x, on_awscluster, ms);
}

void capa_machine_controller_stop(struct capa_ctx *x)
{
	struct capa_machine_state *ms = machine_state;
	(void)x;
	if (!ms)
		return;
	kube_informer_free(ms->awsmachines);
	kube_informer_free(ms->machines);
	free(ms);
	machine_state = NULL;
}
