/* csi-controller against a simulated EC2 (an HTTP server in the test answering with the
 * recorded reply shapes of tests/data/csi/): the paths moto cannot show. Device names AWS
 * refuses, attachment limits, attachments that stay "attaching", volumes that go into the
 * error state, burned client tokens, parameter mismatches, modifications in progress and the
 * merging of concurrent expand/modify calls. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/xml.h"
#include "common/base/json.h"
#include "common/base/timeutil.h"
#include "common/grpc/client.h"
#include "common/grpc/pbjson.h"
#include "common/grpc/server.h"
#include "common/http/server.h"
#include "common/metrics/metrics.h"
#include "modules/csi-controller/csi_controller_grpc.h"
#include "modules/csi-controller/csi_controller_internal.h"
#include "tests/unit/harness.h"

/* ---- the simulated EC2 ---- */

struct svol {
	char id[32], state[16], type[16], name[64];
	long long size, iops;
	char att_inst[32], att_dev[32], att_state[16];
	int att_polls, create_polls;
	bool goes_error;
};

static struct sim {
	pthread_mutex_t lock;
	struct svol v[32];
	int nv;
	char inst[32];
	char mappings[8][16];
	int nmap;
	char in_use[8][16];
	int n_in_use;
	bool attach_limit, burn_first_token, mismatch_first_token, new_goes_error;
	int attach_polls, create_polls, detach_polls;
	bool mod_exists;
	char mod_state[16];
	long long mod_size, mod_iops;
	int mod_polls;
	int n_create, n_attach, n_modify, n_detach, n_delete, n_tags, n_describe_inst;
	int n_requests; /* every request that reached the simulated EC2 */
	char tokens[8][65];
	int ntok;
	char attach_devs[8][16];
	int nattach;
	char last_modify[512];
} S;

static void sim_reset(void)
{
	memset(&S, 0, sizeof(S));
	pthread_mutex_init(&S.lock, NULL);
	str_copy(S.inst, sizeof(S.inst), "i-0123456789abcdef0");
}

static struct svol *sim_vol(const char *id)
{
	for (int i = 0; i < S.nv; i++)
		if (strcmp(S.v[i].id, id) == 0)
			return &S.v[i];
	return NULL;
}

static struct svol *sim_add(const char *state, const char *name, long long size)
{
	struct svol *v = &S.v[S.nv];
	memset(v, 0, sizeof(*v));
	snprintf(v->id, sizeof(v->id), "vol-%017x", 0xa000 + S.nv);
	str_copy(v->state, sizeof(v->state), state);
	str_copy(v->type, sizeof(v->type), "gp3");
	str_copy(v->name, sizeof(v->name), name ? name : "");
	v->size = size;
	v->iops = 3000;
	S.nv++;
	return v;
}

#define END ((const char *)NULL)

/* Fills a template from tests/data/csi/ and appends it to out; the key/value pairs end with END. */
static void tmpl(struct buf *out, const char *name, ...)
{
	char path[128];
	va_list ap;
	snprintf(path, sizeof(path), "csi/%s", name);
	char *t = test_read_file(test_data(path), NULL);
	if (!t)
		return;
	struct buf b = BUF_INIT(0);
	buf_puts(&b, t);
	free(t);
	va_start(ap, name);
	for (const char *k; (k = va_arg(ap, const char *));) {
		const char *v = va_arg(ap, const char *);
		char pat[64];
		snprintf(pat, sizeof(pat), "@%s@", k);
		for (char *p; (p = strstr(b.data, pat));) {
			struct buf n = BUF_INIT(0);
			buf_append(&n, b.data, (size_t)(p - b.data));
			buf_puts(&n, v);
			buf_puts(&n, p + strlen(pat));
			buf_release(&b);
			b = n;
		}
	}
	va_end(ap);
	buf_puts(out, b.data);
	buf_release(&b);
}

static int err_reply(struct http_server_reply *rep, const char *code, const char *msg)
{
	rep->status = 400;
	tmpl(&rep->body, "error.xml", "CODE", code, "MESSAGE", msg, END);
	return 0;
}

/* Form fields of the request body. */
static char *form_get(const char *body, size_t len, const char *key)
{
	size_t kl = strlen(key);
	const char *p = body, *end = body + len;
	while (p < end) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		const char *e = amp ? amp : end;
		if ((size_t)(e - p) > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
			char *v = calloc(1, (size_t)(e - p));
			size_t o = 0;
			for (const char *q = p + kl + 1; q < e; q++) {
				if (*q == '%' && q + 2 < e + 0 + 1) {
					char h[3] = {q[1], q[2], 0};
					v[o++] = (char)strtol(h, NULL, 16);
					q += 2;
				} else {
					v[o++] = *q == '+' ? ' ' : *q;
				}
			}
			return v;
		}
		p = e + 1;
	}
	return NULL;
}

static void vol_xml(struct buf *out, struct svol *v)
{
	struct buf att = BUF_INIT(0), tags = BUF_INIT(0);
	char size[24], iops[24];
	if (*v->att_inst)
		tmpl(&att, "attachment_item.xml", "VOLUME", v->id, "INSTANCE", v->att_inst,
		     "DEVICE", v->att_dev, "STATE", v->att_state, END);
	if (*v->name)
		tmpl(&tags, "tag_item.xml", "KEY", "CSIVolumeName", "VALUE", v->name, END);
	snprintf(size, sizeof(size), "%lld", v->size);
	snprintf(iops, sizeof(iops), "%lld", v->iops);
	tmpl(out, "volume_item.xml", "ID", v->id, "SIZE", size, "STATE", v->state, "ATTACHMENTS",
	     att.data ? att.data : "", "TAGS", tags.data ? tags.data : "", "TYPE", v->type, "IOPS",
	     iops, END);
	buf_release(&att);
	buf_release(&tags);
}

/* A Describe moves time on: creating -> available, attaching -> attached, detaching -> gone. */
static void vol_tick(struct svol *v)
{
	if (strcmp(v->state, "creating") == 0 && v->create_polls-- <= 0)
		str_copy(v->state, sizeof(v->state), v->goes_error ? "error" : "available");
	if (strcmp(v->att_state, "attaching") == 0 && v->att_polls-- <= 0) {
		str_copy(v->att_state, sizeof(v->att_state), "attached");
		str_copy(v->state, sizeof(v->state), "in-use");
	}
	if (strcmp(v->att_state, "detaching") == 0 && v->att_polls-- <= 0) {
		v->att_inst[0] = v->att_dev[0] = v->att_state[0] = 0;
		str_copy(v->state, sizeof(v->state), "available");
	}
}

static int sim_handler(void *ud, const struct http_server_request *req,
		       struct http_server_reply *rep)
{
	const char *b = req->body ? req->body : "";
	size_t n = req->body_len;
	_cleanup_free_ char *action = form_get(b, n, "Action");
	char tmp[64];
	int r = 0;

	rep->status = 200;
	rep->content_type = "text/xml;charset=UTF-8";
	pthread_mutex_lock(&S.lock);
	S.n_requests++;
	if (!action) {
		r = err_reply(rep, "MissingAction", "no action");
	} else if (strcmp(action, "CreateVolume") == 0) {
		_cleanup_free_ char *token = form_get(b, n, "ClientToken"),
				    *size = form_get(b, n, "Size"),
				    *type = form_get(b, n, "VolumeType"),
				    *iops = form_get(b, n, "Iops");
		char *name = NULL;
		for (int i = 1; i < 60 && !name; i++) {
			char k[64];
			snprintf(k, sizeof(k), "TagSpecification.1.Tag.%d.Key", i);
			_cleanup_free_ char *key = form_get(b, n, k);
			if (key && strcmp(key, "CSIVolumeName") == 0) {
				snprintf(k, sizeof(k), "TagSpecification.1.Tag.%d.Value", i);
				name = form_get(b, n, k);
			}
		}
		S.n_create++;
		if (S.ntok < 8 && token)
			str_copy(S.tokens[S.ntok++], 65, token);
		if (S.mismatch_first_token && S.ntok == 1) {
			r = err_reply(rep, "IdempotentParameterMismatch",
				      "The client token you have provided is associated with a "
				      "resource that is already deleted.");
		} else {
			struct svol *v = sim_add("creating", name, size ? atoll(size) : 0);
			if (type)
				str_copy(v->type, sizeof(v->type), type);
			if (iops)
				v->iops = atoll(iops);
			v->create_polls = S.create_polls;
			v->goes_error = S.new_goes_error;
			if (S.burn_first_token && S.ntok == 1) {
				str_copy(v->state, sizeof(v->state), "deleted");
				v->name[0] = 0;
			}
			tmpl(&rep->body, "create_volume.xml", "ID", v->id, "SIZE",
			     size ? size : "0", "TYPE", v->type, "IOPS", iops ? iops : "3000", END);
		}
		free(name);
	} else if (strcmp(action, "DescribeVolumes") == 0) {
		_cleanup_free_ char *fname = form_get(b, n, "Filter.1.Name"),
				    *fval = form_get(b, n, "Filter.1.Value.1");
		struct buf items = BUF_INIT(0);
		bool missing = false;
		if (fname && strcmp(fname, "tag:CSIVolumeName") == 0) {
			for (int i = 0; i < S.nv; i++)
				if (fval && strcmp(S.v[i].name, fval) == 0) {
					vol_tick(&S.v[i]);
					vol_xml(&items, &S.v[i]);
				}
		} else {
			for (int i = 1; i < 600; i++) {
				snprintf(tmp, sizeof(tmp), "VolumeId.%d", i);
				_cleanup_free_ char *id = form_get(b, n, tmp);
				if (!id)
					break;
				struct svol *v = sim_vol(id);
				if (!v) {
					missing = true;
					snprintf(tmp, sizeof(tmp),
						 "The volume '%s' does not exist.", id);
					break;
				}
				vol_tick(v);
				vol_xml(&items, v);
			}
		}
		if (missing)
			r = err_reply(rep, "InvalidVolume.NotFound", tmp);
		else
			tmpl(&rep->body, "describe_volumes.xml", "ITEMS",
			     items.data ? items.data : "", END);
		buf_release(&items);
	} else if (strcmp(action, "DescribeInstances") == 0) {
		_cleanup_free_ char *id = form_get(b, n, "InstanceId.1");
		S.n_describe_inst++;
		if (!id || strcmp(id, S.inst) != 0) {
			snprintf(tmp, sizeof(tmp), "The instance ID '%s' does not exist",
				 id ? id : "");
			r = err_reply(rep, "InvalidInstanceID.NotFound", tmp);
		} else {
			struct buf m = BUF_INIT(0);
			tmpl(&m, "mapping_item.xml", "DEVICE", "/dev/xvda", "VOLUME",
			     "vol-0root0000000000000", END);
			for (int i = 0; i < S.nmap; i++)
				tmpl(&m, "mapping_item.xml", "DEVICE", S.mappings[i], "VOLUME",
				     "vol-0other000000000000", END);
			for (int i = 0; i < S.nv; i++)
				if (*S.v[i].att_inst && strcmp(S.v[i].att_state, "attached") == 0)
					tmpl(&m, "mapping_item.xml", "DEVICE", S.v[i].att_dev,
					     "VOLUME", S.v[i].id, END);
			tmpl(&rep->body, "describe_instances.xml", "ID", S.inst, "MAPPINGS", m.data,
			     END);
			buf_release(&m);
		}
	} else if (strcmp(action, "AttachVolume") == 0) {
		_cleanup_free_ char *vid = form_get(b, n, "VolumeId"),
				    *iid = form_get(b, n, "InstanceId"),
				    *dev = form_get(b, n, "Device");
		struct svol *v = vid ? sim_vol(vid) : NULL;
		bool in_use = false;
		S.n_attach++;
		if (S.nattach < 8 && dev)
			str_copy(S.attach_devs[S.nattach++], 16, dev);
		for (int i = 0; i < S.n_in_use; i++)
			in_use |= dev && strcmp(S.in_use[i], dev) == 0;
		if (!v) {
			r = err_reply(rep, "InvalidVolume.NotFound", "The volume does not exist.");
		} else if (S.attach_limit) {
			r = err_reply(
			    rep, "AttachmentLimitExceeded",
			    "You have reached the limit of volumes that can be attached.");
		} else if (in_use) {
			char msg[160];
			snprintf(msg, sizeof(msg),
				 "Invalid value '%s' for unixDevice. Attachment point %s is "
				 "already in use",
				 dev, dev);
			r = err_reply(rep, "InvalidParameterValue", msg);
		} else {
			str_copy(v->att_inst, sizeof(v->att_inst), iid);
			str_copy(v->att_dev, sizeof(v->att_dev), dev);
			str_copy(v->att_state, sizeof(v->att_state), "attaching");
			v->att_polls = S.attach_polls;
			tmpl(&rep->body, "attach_volume.xml", "VOLUME", vid, "INSTANCE", iid,
			     "DEVICE", dev, END);
		}
	} else if (strcmp(action, "DetachVolume") == 0) {
		_cleanup_free_ char *vid = form_get(b, n, "VolumeId");
		struct svol *v = vid ? sim_vol(vid) : NULL;
		S.n_detach++;
		if (!v || !*v->att_inst) {
			r = err_reply(rep, "InvalidAttachment.NotFound",
				      "The volume is not attached.");
		} else {
			str_copy(v->att_state, sizeof(v->att_state), "detaching");
			v->att_polls = S.detach_polls ? S.detach_polls : 1;
			tmpl(&rep->body, "detach_volume.xml", "VOLUME", v->id, "INSTANCE",
			     v->att_inst, "DEVICE", v->att_dev, END);
		}
	} else if (strcmp(action, "DeleteVolume") == 0) {
		_cleanup_free_ char *vid = form_get(b, n, "VolumeId");
		struct svol *v = vid ? sim_vol(vid) : NULL;
		S.n_delete++;
		if (!v || strcmp(v->state, "deleted") == 0)
			r = err_reply(rep, "InvalidVolume.NotFound", "The volume does not exist.");
		else if (*v->att_inst)
			r = err_reply(rep, "VolumeInUse", "Volume is in use");
		else {
			str_copy(v->state, sizeof(v->state), "deleted");
			tmpl(&rep->body, "return_true.xml", "ACTION", "DeleteVolume", END);
		}
	} else if (strcmp(action, "ModifyVolume") == 0) {
		_cleanup_free_ char *vid = form_get(b, n, "VolumeId"),
				    *size = form_get(b, n, "Size"), *iops = form_get(b, n, "Iops");
		struct svol *v = vid ? sim_vol(vid) : NULL;
		S.n_modify++;
		snprintf(S.last_modify, sizeof(S.last_modify), "size=%s iops=%s", size ? size : "-",
			 iops ? iops : "-");
		if (!v) {
			r = err_reply(rep, "InvalidVolume.NotFound", "The volume does not exist.");
		} else {
			if (size)
				v->size = S.mod_size = atoll(size);
			if (iops)
				v->iops = S.mod_iops = atoll(iops);
			S.mod_exists = true;
			str_copy(S.mod_state, sizeof(S.mod_state), "modifying");
			S.mod_polls = 2;
			char sz[24], io[24];
			snprintf(sz, sizeof(sz), "%lld", v->size);
			snprintf(io, sizeof(io), "%lld", v->iops);
			tmpl(&rep->body, "modify_volume.xml", "ID", v->id, "SIZE", sz, "IOPS", io,
			     "TYPE", v->type, END);
		}
	} else if (strcmp(action, "DescribeVolumesModifications") == 0) {
		_cleanup_free_ char *vid = form_get(b, n, "VolumeId.1");
		if (!S.mod_exists) {
			tmpl(&rep->body, "describe_volumes.xml", "ITEMS", "",
			     END); /* an empty set */
		} else {
			if (strcmp(S.mod_state, "modifying") == 0 && S.mod_polls-- <= 0)
				str_copy(S.mod_state, sizeof(S.mod_state), "optimizing");
			char sz[24], io[24];
			snprintf(sz, sizeof(sz), "%lld", S.mod_size);
			snprintf(io, sizeof(io), "%lld", S.mod_iops);
			tmpl(&rep->body, "describe_modifications.xml", "ID", vid ? vid : "",
			     "STATE", S.mod_state, "SIZE", sz, "IOPS", io, "TYPE", "gp3", END);
		}
	} else if (strcmp(action, "CreateTags") == 0) {
		S.n_tags++;
		tmpl(&rep->body, "return_true.xml", "ACTION", "CreateTags", END);
	} else if (strcmp(action, "DescribeAvailabilityZones") == 0) {
		tmpl(&rep->body, "describe_zones.xml", END);
	} else {
		r = err_reply(rep, "InvalidAction", action);
	}
	pthread_mutex_unlock(&S.lock);
	return r;
}

/* ---- the controller under test ---- */

struct env {
	struct http_server *http;
	struct csi_ctrl ctrl;
	struct rpc_server *srv;
	struct rpc_client *cl;
	char ep[256];
};

static int env_start(struct env *e, int64_t modify_window_ns)
{
	char url[64];
	int r;

	memset(e, 0, sizeof(*e));
	if ((r = http_server_new(&(struct http_server_opts){.bind = "127.0.0.1:0", .threads = 4},
				 &e->http)) < 0 ||
	    (r = http_server_handle(e->http, "/", true, sim_handler, NULL)) < 0 ||
	    (r = http_server_start(e->http)) < 0)
		return r;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", http_server_port(e->http));
	e->ctrl.batching = true;
	e->ctrl.poll_scale = 50; /* 250 ms between polls become 5 ms */
	e->ctrl.attach_timeout_ns = 5 * NSEC_PER_SEC;
	e->ctrl.create_timeout_ns = 5 * NSEC_PER_SEC;
	e->ctrl.modify_window_ns = modify_window_ns;
	struct aws_client_opts ao = {
	    .region = "us-east-1",
	    .endpoint_url = url,
	    .max_attempts = 1,
	    .creds = {.access_key_id = "AKIDTEST", .secret_access_key = "secret"},
	};
	if ((r = csi_ctrl_setup(&e->ctrl, &ao)) < 0)
		return r;
	snprintf(e->ep, sizeof(e->ep), "unix://%s/ctrl.sock", test_tmpdir());
	if ((r = rpc_server_new(&(struct rpc_server_opts){.endpoint = e->ep}, &e->srv)) < 0 ||
	    (r = rpc_server_register(e->srv, csi_ctrl_methods, &e->ctrl)) < 0 ||
	    (r = rpc_server_start(e->srv)) < 0)
		return r;
	return rpc_client_new(e->ep, &e->cl);
}

static void env_stop(struct env *e)
{
	rpc_client_free(e->cl);
	rpc_server_free(e->srv);
	csi_ctrl_release(&e->ctrl);
	http_server_free(e->http);
}

/* Calls method with a JSON request; returns the status code; *ret_json the reply as JSON. */
static int call(struct env *e, const char *method, const char *json, char **ret_json, char *msg,
		size_t msglen)
{
	const struct rpc_method *m = NULL;
	char path[128], err[256];
	cJSON *j = NULL;
	ProtobufCMessage *req = NULL, *rep = NULL;
	struct rpc_status st = {0};

	snprintf(path, sizeof(path), "/csi.v1.Controller/%s", method);
	for (const struct rpc_method *p = csi_ctrl_methods; p->path; p++)
		if (strcmp(p->path, path) == 0)
			m = p;
	if (!m || json_parse(json, strlen(json), &j, NULL) < 0 ||
	    pbjson_to_msg(j, m->request, &req, err, sizeof(err)) < 0) {
		cJSON_Delete(j);
		return -EINVAL;
	}
	cJSON_Delete(j);
	int r = rpc_client_call(e->cl, path, req, m->reply, 20 * NSEC_PER_SEC, &rep, &st);
	protobuf_c_message_free_unpacked(req, NULL);
	if (r < 0)
		return r;
	if (msg)
		str_copy(msg, msglen, st.message);
	if (ret_json)
		*ret_json = rep ? pbjson_print(rep, 0, false) : NULL;
	if (rep)
		protobuf_c_message_free_unpacked(rep, NULL);
	return st.code;
}

#define CAP "{\"mount\":{},\"access_mode\":{\"mode\":\"SINGLE_NODE_WRITER\"}}"

static char *publish_req(const char *vol)
{
	char *s = NULL;
	if (asprintf(&s,
		     "{\"volume_id\":\"%s\",\"node_id\":\"i-0123456789abcdef0\",\"volume_"
		     "capability\":" CAP "}",
		     vol) < 0)
		return NULL;
	return s;
}

TEST(csi_ctrl_publish_skips_names_aws_refuses)
{
	struct env e;
	char *out = NULL, msg[512];

	sim_reset();
	struct svol *v = sim_add("available", NULL, 10);
	str_copy(S.mappings[S.nmap++], 16, "/dev/sdab");    /* the same device as /dev/xvdab */
	str_copy(S.in_use[S.n_in_use++], 16, "/dev/xvdaa"); /* EC2 still holds this name */
	S.attach_polls = 3;
	ASSERT_OK(env_start(&e, 0));
	_cleanup_free_ char *rq = publish_req(v->id);
	ASSERT_EQ(call(&e, "ControllerPublishVolume", rq, &out, msg, sizeof(msg)), RPC_OK);
	ASSERT_CONTAINS(out, "\"devicePath\":\"/dev/xvdac\"");
	free(out);
	ASSERT_EQ(S.n_attach, 2);
	ASSERT_STREQ(S.attach_devs[0], "/dev/xvdaa");
	ASSERT_STREQ(S.attach_devs[1], "/dev/xvdac");
	ASSERT_EQ(csi_devices_held(e.ctrl.devices, S.inst), 0); /* released once attached */
	/* again: already attached, no new attach call */
	ASSERT_EQ(call(&e, "ControllerPublishVolume", rq, &out, msg, sizeof(msg)), RPC_OK);
	ASSERT_CONTAINS(out, "/dev/xvdac");
	free(out);
	ASSERT_EQ(S.n_attach, 2);
	/* a second volume: xvdaa is now tried last, xvdac is in the mappings */
	struct svol *v2 = sim_add("available", NULL, 10);
	S.n_in_use = 0;
	_cleanup_free_ char *rq2 = publish_req(v2->id);
	ASSERT_EQ(call(&e, "ControllerPublishVolume", rq2, &out, msg, sizeof(msg)), RPC_OK);
	ASSERT_CONTAINS(out, "/dev/xvdad");
	free(out);
	env_stop(&e);
}

TEST(csi_ctrl_publish_limits_and_conflicts)
{
	struct env e;
	char msg[512];

	sim_reset();
	struct svol *v = sim_add("available", NULL, 10), *other = sim_add("in-use", NULL, 10);
	str_copy(other->att_inst, sizeof(other->att_inst), "i-0fedcba9876543210");
	str_copy(other->att_dev, sizeof(other->att_dev), "/dev/xvdaa");
	str_copy(other->att_state, sizeof(other->att_state), "attached");
	S.attach_limit = true;
	ASSERT_OK(env_start(&e, 0));
	_cleanup_free_ char *rq = publish_req(v->id), *rq_other = publish_req(other->id);
	ASSERT_EQ(call(&e, "ControllerPublishVolume", rq, NULL, msg, sizeof(msg)),
		  RPC_RESOURCE_EXHAUSTED);
	ASSERT_CONTAINS(msg, "AttachmentLimitExceeded");
	ASSERT_EQ(csi_devices_held(e.ctrl.devices, S.inst), 0);
	/* attached to another node, without multi-attach */
	ASSERT_EQ(call(&e, "ControllerPublishVolume", rq_other, NULL, msg, sizeof(msg)),
		  RPC_FAILED_PRECONDITION);
	ASSERT_CONTAINS(msg, "i-0fedcba9876543210");
	/* an unknown node */
	char bad[256];
	snprintf(
	    bad, sizeof(bad),
	    "{\"volume_id\":\"%s\",\"node_id\":\"i-0aaaaaaaaaaaaaaaa\",\"volume_capability\":" CAP
	    "}",
	    v->id);
	ASSERT_EQ(call(&e, "ControllerPublishVolume", bad, NULL, msg, sizeof(msg)), RPC_NOT_FOUND);
	/* DeleteVolume of an attached volume */
	char del[128];
	snprintf(del, sizeof(del), "{\"volume_id\":\"%s\"}", other->id);
	ASSERT_EQ(call(&e, "DeleteVolume", del, NULL, msg, sizeof(msg)), RPC_FAILED_PRECONDITION);
	env_stop(&e);
}

TEST(csi_ctrl_publish_waits_then_gives_up)
{
	struct env e;
	char msg[512], *out = NULL;

	sim_reset();
	struct svol *v = sim_add("available", NULL, 10);
	S.attach_polls = 1000000; /* stuck attaching */
	ASSERT_OK(env_start(&e, 0));
	e.ctrl.attach_timeout_ns = 300 * NSEC_PER_MSEC;
	_cleanup_free_ char *rq = publish_req(v->id);
	ASSERT_EQ(call(&e, "ControllerPublishVolume", rq, NULL, msg, sizeof(msg)),
		  RPC_DEADLINE_EXCEEDED);
	ASSERT_CONTAINS(msg, "still attaching");
	/* the name stays held (tainted) while the attachment may still complete */
	ASSERT_EQ(csi_devices_held(e.ctrl.devices, S.inst), 1);
	/* the retry sees the attachment in progress and waits for it, no second attach */
	pthread_mutex_lock(&S.lock);
	v->att_polls = 2;
	pthread_mutex_unlock(&S.lock);
	ASSERT_EQ(call(&e, "ControllerPublishVolume", rq, &out, msg, sizeof(msg)), RPC_OK);
	ASSERT_CONTAINS(out, "/dev/xvdaa");
	free(out);
	ASSERT_EQ(S.n_attach, 1);
	ASSERT_EQ(csi_devices_held(e.ctrl.devices, S.inst), 0);
	/* unpublish waits for the detach; twice is fine */
	char un[128];
	snprintf(un, sizeof(un), "{\"volume_id\":\"%s\",\"node_id\":\"%s\"}", v->id, S.inst);
	ASSERT_EQ(call(&e, "ControllerUnpublishVolume", un, NULL, msg, sizeof(msg)), RPC_OK);
	ASSERT_EQ(S.n_detach, 1);
	ASSERT_EQ(v->att_inst[0], 0);
	ASSERT_EQ(call(&e, "ControllerUnpublishVolume", un, NULL, msg, sizeof(msg)), RPC_OK);
	ASSERT_EQ(S.n_detach, 1);
	env_stop(&e);
}

/* A detach the wait gives up on shows in the detach-pending metric (here from the first poll),
 * labelled with the attachment's state; the retry that sees it done removes the series. (No
 * metrics_reset here: the AWS client keeps its families for the process.) */
TEST(csi_ctrl_detach_pending_metric)
{
	struct env e;
	char msg[512], un[128];

	sim_reset();
	struct svol *v = sim_add("available", NULL, 10);
	ASSERT_OK(env_start(&e, 0));
	_cleanup_free_ char *rq = publish_req(v->id);
	ASSERT_EQ(call(&e, "ControllerPublishVolume", rq, NULL, msg, sizeof(msg)), RPC_OK);
	snprintf(un, sizeof(un), "{\"volume_id\":\"%s\",\"node_id\":\"%s\"}", v->id, S.inst);
	_cleanup_buf_ struct buf out = BUF_INIT(0);
	/* a quick detach (the default threshold, 60 s): never shown */
	ASSERT_EQ(call(&e, "ControllerUnpublishVolume", un, NULL, msg, sizeof(msg)), RPC_OK);
	ASSERT_OK(metrics_write(&out));
	ASSERT_NOT_CONTAINS(out.data, "aws_ebs_csi_ec2_detach_pending_seconds_total{");
	ASSERT_CONTAINS(out.data, "\naws_ebs_csi_ec2_collector_scrapes_total ");
	ASSERT_CONTAINS(out.data, "\naws_ebs_csi_ec2_collector_duration_seconds_count ");
	env_stop(&e);

	/* a threshold of 0, and a detach that outlasts the wait */
	sim_reset();
	v = sim_add("available", NULL, 10);
	S.detach_polls = 1000000;
	e = (struct env){0};
	ASSERT_OK(env_start(&e, 0));
	csi_detaching_free(e.ctrl.detaching);
	ASSERT_OK(csi_detaching_new(0, &e.ctrl.detaching));
	e.ctrl.attach_timeout_ns = 200 * NSEC_PER_MSEC;
	free(rq);
	rq = publish_req(v->id);
	snprintf(un, sizeof(un), "{\"volume_id\":\"%s\",\"node_id\":\"%s\"}", v->id, S.inst);
	ASSERT_EQ(call(&e, "ControllerPublishVolume", rq, NULL, msg, sizeof(msg)), RPC_OK);
	ASSERT_EQ(call(&e, "ControllerUnpublishVolume", un, NULL, msg, sizeof(msg)),
		  RPC_DEADLINE_EXCEEDED);
	char series[256];
	snprintf(series, sizeof(series),
		 "aws_ebs_csi_ec2_detach_pending_seconds_total{volume_id=\"%s\",instance_id=\"%s\","
		 "attachment_state=\"detaching\"} ",
		 v->id, S.inst);
	buf_reset(&out);
	ASSERT_OK(metrics_write(&out));
	const char *at = strstr(out.data, series);
	ASSERT_NOT_NULL(at);
	ASSERT_GE(strtod(at + strlen(series), NULL), 0.2); /* pending since the wait began */
	ASSERT_CONTAINS(out.data, "# TYPE aws_ebs_csi_ec2_detach_pending_seconds_total counter\n");
	/* a poll sees it busy: the series follows the state, with the same start */
	csi_detaching_seen(e.ctrl.detaching, v->id, S.inst, "busy");
	buf_reset(&out);
	ASSERT_OK(metrics_write(&out));
	ASSERT_NOT_CONTAINS(out.data, "attachment_state=\"detaching\"");
	at = strstr(out.data, "attachment_state=\"busy\"} ");
	ASSERT_NOT_NULL(at);
	ASSERT_GE(strtod(at + strlen("attachment_state=\"busy\"} "), NULL), 0.2);
	/* the detach completes: the retry sees it, the series goes */
	pthread_mutex_lock(&S.lock);
	str_copy(v->att_state, sizeof(v->att_state), "detaching");
	v->att_polls = 0;
	pthread_mutex_unlock(&S.lock);
	ASSERT_EQ(call(&e, "ControllerUnpublishVolume", un, NULL, msg, sizeof(msg)), RPC_OK);
	buf_reset(&out);
	ASSERT_OK(metrics_write(&out));
	ASSERT_NOT_CONTAINS(out.data, "aws_ebs_csi_ec2_detach_pending_seconds_total{");
	env_stop(&e);
}

#define CREATE(name, extra)                                                                        \
	"{\"name\":\"" name "\",\"volume_capabilities\":[" CAP                                     \
	"],\"capacity_range\":{\"required_bytes\":10737418240}" extra "}"

TEST(csi_ctrl_create_idempotency_without_aws)
{
	struct env e;
	char msg[512], *out = NULL, *out2 = NULL;

	sim_reset();
	S.create_polls = 2;
	ASSERT_OK(env_start(&e, 0));
	ASSERT_EQ(call(&e, "CreateVolume", CREATE("pvc-a", ""), &out, msg, sizeof(msg)), RPC_OK);
	ASSERT_EQ(S.n_create, 1);
	ASSERT_EQ(strlen(S.tokens[0]), 64);
	/* again: found by its tag, no CreateVolume */
	ASSERT_EQ(call(&e, "CreateVolume", CREATE("pvc-a", ""), &out2, msg, sizeof(msg)), RPC_OK);
	ASSERT_STREQ(out, out2);
	ASSERT_EQ(S.n_create, 1);
	free(out2);
	free(out);
	/* different parameters */
	ASSERT_EQ(call(&e, "CreateVolume", CREATE("pvc-a", ",\"parameters\":{\"type\":\"gp2\"}"),
		       NULL, msg, sizeof(msg)),
		  RPC_ALREADY_EXISTS);
	ASSERT_CONTAINS(msg, "volume type");
	ASSERT_EQ(S.n_create, 1);
	/* a volume still creating when the repeat comes: waited for, not created again */
	pthread_mutex_lock(&S.lock);
	struct svol *v = sim_add("creating", "pvc-b", 10);
	v->create_polls = 3;
	pthread_mutex_unlock(&S.lock);
	ASSERT_EQ(call(&e, "CreateVolume", CREATE("pvc-b", ""), &out, msg, sizeof(msg)), RPC_OK);
	ASSERT_CONTAINS(out, v->id);
	free(out);
	ASSERT_EQ(S.n_create, 1);
	env_stop(&e);
}

TEST(csi_ctrl_create_burned_and_mismatched_tokens)
{
	struct env e;
	char msg[512], *out = NULL;

	sim_reset();
	S.burn_first_token = true; /* the first token names a volume deleted since */
	ASSERT_OK(env_start(&e, 0));
	ASSERT_EQ(call(&e, "CreateVolume", CREATE("pvc-c", ""), &out, msg, sizeof(msg)), RPC_OK);
	ASSERT_EQ(S.n_create, 2);
	ASSERT_TRUE(strcmp(S.tokens[0], S.tokens[1]) != 0);
	ASSERT_CONTAINS(out, "vol-0000000000000a001"); /* the second volume */
	free(out);
	env_stop(&e);

	sim_reset();
	S.mismatch_first_token = true;
	ASSERT_OK(env_start(&e, 0));
	ASSERT_EQ(call(&e, "CreateVolume", CREATE("pvc-d", ""), &out, msg, sizeof(msg)), RPC_OK);
	ASSERT_EQ(S.n_create, 2);
	free(out);
	/* the tokens depend on the name and the parameters */
	char t1[65], t2[65];
	str_copy(t1, sizeof(t1), S.tokens[1]);
	ASSERT_EQ(call(&e, "CreateVolume", CREATE("pvc-e", ""), NULL, msg, sizeof(msg)), RPC_OK);
	str_copy(t2, sizeof(t2), S.tokens[2]);
	ASSERT_TRUE(strcmp(t1, t2) != 0);
	env_stop(&e);
}

TEST(csi_ctrl_create_error_state_and_limits)
{
	struct env e;
	char msg[512];

	sim_reset();
	S.new_goes_error = true;
	ASSERT_OK(env_start(&e, 0));
	ASSERT_EQ(call(&e, "CreateVolume", CREATE("pvc-f", ""), NULL, msg, sizeof(msg)),
		  RPC_INTERNAL);
	ASSERT_CONTAINS(msg, "error state");
	ASSERT_EQ(S.n_delete, 1); /* not leaked */
	/* checked before AWS: no call made */
	int before = S.n_create;
	ASSERT_EQ(
	    call(&e, "CreateVolume",
		 CREATE("pvc-g",
			",\"parameters\":{\"type\":\"io2\",\"iops\":\"100\",\"iopsPerGB\":\"5\"}"),
		 NULL, msg, sizeof(msg)),
	    RPC_INVALID_ARGUMENT);
	ASSERT_EQ(
	    call(&e, "CreateVolume",
		 "{\"name\":\"pvc-h\",\"volume_capabilities\":[" CAP
		 "],\"capacity_range\":{\"required_bytes\":1},\"parameters\":{\"type\":\"sc1\"}}",
		 NULL, msg, sizeof(msg)),
	    RPC_OUT_OF_RANGE);
	ASSERT_CONTAINS(msg, "sc1 volumes must be 125 to 16384 GiB");
	ASSERT_EQ(S.n_create, before);
	env_stop(&e);
}

struct bg {
	struct env *e;
	const char *method;
	const char *req;
	int code;
	char *out;
};

static void *bg_call(void *arg)
{
	struct bg *b = arg;
	char msg[256];
	b->code = call(b->e, b->method, b->req, &b->out, msg, sizeof(msg));
	return NULL;
}

TEST(csi_ctrl_expand_and_modify_are_merged)
{
	struct env e;
	pthread_t t1, t2;
	char rq1[256], rq2[256];

	sim_reset();
	struct svol *v = sim_add("available", NULL, 10);
	ASSERT_OK(env_start(&e, 300 * NSEC_PER_MSEC));
	snprintf(rq1, sizeof(rq1),
		 "{\"volume_id\":\"%s\",\"capacity_range\":{\"required_bytes\":21474836480}}",
		 v->id);
	snprintf(rq2, sizeof(rq2),
		 "{\"volume_id\":\"%s\",\"mutable_parameters\":{\"iops\":\"6000\"}}", v->id);
	struct bg b1 = {&e, "ControllerExpandVolume", rq1},
		  b2 = {&e, "ControllerModifyVolume", rq2};
	ASSERT_EQ(pthread_create(&t1, NULL, bg_call, &b1), 0);
	sleep_ns(50 * NSEC_PER_MSEC);
	ASSERT_EQ(pthread_create(&t2, NULL, bg_call, &b2), 0);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	ASSERT_EQ(b1.code, RPC_OK);
	ASSERT_EQ(b2.code, RPC_OK);
	ASSERT_CONTAINS(b1.out, "\"capacity_bytes\":21474836480");
	ASSERT_CONTAINS(b1.out, "\"node_expansion_required\":true");
	free(b1.out);
	free(b2.out);
	ASSERT_EQ(S.n_modify, 1); /* one ModifyVolume for both */
	ASSERT_STREQ(S.last_modify, "size=20 iops=6000");
	/* a retry while the modification runs: no second ModifyVolume */
	pthread_mutex_lock(&S.lock);
	str_copy(S.mod_state, sizeof(S.mod_state), "modifying");
	S.mod_polls = 2;
	v->size = 10; /* not visible yet */
	pthread_mutex_unlock(&S.lock);
	char *out = NULL, msg[256];
	ASSERT_EQ(call(&e, "ControllerExpandVolume", rq1, &out, msg, sizeof(msg)), RPC_OK);
	free(out);
	ASSERT_EQ(S.n_modify, 1);
	/* conflicting values in one window are refused */
	snprintf(rq2, sizeof(rq2),
		 "{\"volume_id\":\"%s\",\"capacity_range\":{\"required_bytes\":32212254720}}",
		 v->id);
	struct bg b3 = {&e, "ControllerExpandVolume", rq1},
		  b4 = {&e, "ControllerExpandVolume", rq2};
	pthread_mutex_lock(&S.lock);
	S.mod_exists = false;
	v->size = 10;
	pthread_mutex_unlock(&S.lock);
	ASSERT_EQ(pthread_create(&t1, NULL, bg_call, &b3), 0);
	sleep_ns(50 * NSEC_PER_MSEC);
	ASSERT_EQ(pthread_create(&t2, NULL, bg_call, &b4), 0);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	/* one of the two wins the window, the other is refused; the 50 ms head start of b3 does
	 * not decide which on a loaded machine */
	ASSERT_TRUE((b3.code == RPC_OK && b4.code == RPC_ABORTED) ||
		    (b3.code == RPC_ABORTED && b4.code == RPC_OK));
	free(b3.out);
	free(b4.out);
	env_stop(&e);
}

/* ControllerModifyVolume with no mutable parameters succeeds at once and asks EC2 nothing, for
 * a volume EC2 has or not (as upstream); the id checks still come first. */
TEST(csi_ctrl_modify_nothing_is_a_noop)
{
	struct env e;
	char msg[256], rq[256], *out = NULL;

	sim_reset();
	struct svol *v = sim_add("available", NULL, 10);
	ASSERT_OK(env_start(&e, 30 * NSEC_PER_SEC)); /* a coalescer window no test would sit out */
	int before = S.n_requests;
	int64_t t0 = now_mono_ns();
	snprintf(rq, sizeof(rq), "{\"volume_id\":\"%s\"}", v->id);
	ASSERT_EQ(call(&e, "ControllerModifyVolume", rq, &out, msg, sizeof(msg)), RPC_OK);
	ASSERT_STREQ(out, "{}");
	free(out);
	snprintf(rq, sizeof(rq), "{\"volume_id\":\"%s\",\"mutable_parameters\":{}}", v->id);
	ASSERT_EQ(call(&e, "ControllerModifyVolume", rq, NULL, msg, sizeof(msg)), RPC_OK);
	ASSERT_EQ(call(&e, "ControllerModifyVolume", "{\"volume_id\":\"vol-0123456789abcdef0\"}",
		       NULL, msg, sizeof(msg)),
		  RPC_OK);
	ASSERT_LT(now_mono_ns() - t0, 10 * NSEC_PER_SEC);
	ASSERT_EQ(S.n_requests - before, 0);
	ASSERT_EQ(S.n_modify + S.n_tags, 0);
	ASSERT_EQ(call(&e, "ControllerModifyVolume", "{}", NULL, msg, sizeof(msg)),
		  RPC_INVALID_ARGUMENT);
	ASSERT_CONTAINS(msg, "volume id is missing");
	ASSERT_EQ(call(&e, "ControllerModifyVolume", "{\"volume_id\":\"vol-1\"}", NULL, msg,
		       sizeof(msg)),
		  RPC_INVALID_ARGUMENT);
	ASSERT_EQ(S.n_requests - before, 0);
	env_stop(&e);
}

TEST(csi_ctrl_token_roundtrip)
{
	char *t = NULL, *aws = NULL;
	size_t skip = 0;

	ASSERT_OK(csi_token_encode("eyJ2IjoxfQ==", 3, &t));
	ASSERT_NOT_CONTAINS(t, "=");
	ASSERT_OK(csi_token_decode(t, &aws, &skip));
	ASSERT_STREQ(aws, "eyJ2IjoxfQ==");
	ASSERT_EQ(skip, 3);
	free(t);
	free(aws);
	aws = NULL;
	ASSERT_OK(csi_token_encode(NULL, 7, &t));
	ASSERT_OK(csi_token_decode(t, &aws, &skip));
	ASSERT_NULL(aws);
	ASSERT_EQ(skip, 7);
	free(t);
	ASSERT_ERR(csi_token_decode("!!", &aws, &skip), EINVAL);
	ASSERT_ERR(csi_token_decode("aGVsbG8", &aws, &skip), EINVAL); /* "hello": not ours */
	/* the same tokens as before the encoding went through OpenSSL: URL-safe, unpadded */
	ASSERT_OK(csi_token_encode("x", 3, &t));
	ASSERT_STREQ(t, "MTozOng");
	free(t);
	ASSERT_ERR(csi_token_decode("MTozOng=", &aws, &skip), EINVAL);
}

TEST(csi_ctrl_publish_stuck_attaching_is_undone)
{
	struct env e;
	char msg[512], *out = NULL;

	sim_reset();
	struct svol *v = sim_add("available", NULL, 10);
	S.attach_polls = 1000000; /* the first name never attaches */
	ASSERT_OK(env_start(&e, 0));
	e.ctrl.stuck_attaching_ns = 150 * NSEC_PER_MSEC;
	_cleanup_free_ char *rq = publish_req(v->id);
	ASSERT_EQ(call(&e, "ControllerPublishVolume", rq, NULL, msg, sizeof(msg)), RPC_ABORTED);
	ASSERT_CONTAINS(msg, "stuck attaching");
	ASSERT_EQ(S.n_detach, 1);
	ASSERT_EQ(csi_devices_held(e.ctrl.devices, S.inst), 0);
	pthread_mutex_lock(&S.lock);
	S.attach_polls = 1;
	pthread_mutex_unlock(&S.lock);
	/* the retry must not be judged stuck: its wait for the detach, the attach and two polls
	 * can take more than 150 ms on a loaded machine */
	e.ctrl.stuck_attaching_ns = 60 * NSEC_PER_SEC;
	/* the retry waits for the detach, then uses another name */
	ASSERT_EQ(call(&e, "ControllerPublishVolume", rq, &out, msg, sizeof(msg)), RPC_OK);
	ASSERT_CONTAINS(out, "/dev/xvdab");
	free(out);
	ASSERT_EQ(S.n_attach, 2);
	env_stop(&e);
}

/* Identifiers that cannot name an EC2 object, in every field of every call that takes one: the
 * answer comes before any AWS call, and the message carries the value escaped and cut. */
TEST(csi_ctrl_malformed_ids_make_no_aws_call)
{
	enum { BIG = 100 * 1024 };
	static const struct {
		const char *method, *fmt;
		int code;
	} cases[] = {
	    {"CreateVolume",
	     "{\"name\":\"v1\",\"volume_capabilities\":[" CAP
	     "],\"volume_content_source\":{\"snapshot\":{\"snapshot_id\":\"%s\"}}}",
	     RPC_INVALID_ARGUMENT},
	    {"CreateVolume",
	     "{\"name\":\"v1\",\"volume_capabilities\":[" CAP
	     "],\"volume_content_source\":{\"volume\":{\"volume_id\":\"%s\"}}}",
	     RPC_INVALID_ARGUMENT},
	    {"CreateVolume",
	     "{\"name\":\"v1\",\"volume_capabilities\":[" CAP
	     "],\"accessibility_requirements\":{\"preferred\":[{\"segments\":{"
	     "\"topology.kubernetes.io/zone\":\"%s\"}}]}}",
	     RPC_INVALID_ARGUMENT},
	    {"CreateVolume",
	     "{\"name\":\"v1\",\"volume_capabilities\":[" CAP
	     "],\"accessibility_requirements\":{\"requisite\":[{\"segments\":{"
	     "\"topology.k8s.aws/zone-id\":\"%s\"}}]}}",
	     RPC_INVALID_ARGUMENT},
	    {"CreateVolume",
	     "{\"name\":\"v1\",\"volume_capabilities\":[" CAP
	     "],\"parameters\":{\"outpostArn\":\"%s\"}}",
	     RPC_INVALID_ARGUMENT},
	    {"DeleteVolume", "{\"volume_id\":\"%s\"}", RPC_OK},
	    {"ValidateVolumeCapabilities",
	     "{\"volume_id\":\"%s\",\"volume_capabilities\":[" CAP "]}", RPC_INVALID_ARGUMENT},
	    {"ControllerGetVolume", "{\"volume_id\":\"%s\"}", RPC_INVALID_ARGUMENT},
	    {"ControllerPublishVolume",
	     "{\"volume_id\":\"%s\",\"node_id\":\"i-0123456789abcdef0\",\"volume_capability\":" CAP
	     "}",
	     RPC_INVALID_ARGUMENT},
	    {"ControllerPublishVolume",
	     "{\"volume_id\":\"vol-0123456789abcdef0\",\"node_id\":\"%s\",\"volume_capability\":" CAP
	     "}",
	     RPC_INVALID_ARGUMENT},
	    {"ControllerUnpublishVolume", "{\"volume_id\":\"%s\",\"node_id\":\"i-0123456789abcdef0\"}",
	     RPC_OK},
	    {"ControllerUnpublishVolume", "{\"volume_id\":\"vol-0123456789abcdef0\",\"node_id\":\"%s\"}",
	     RPC_OK},
	    {"ControllerExpandVolume",
	     "{\"volume_id\":\"%s\",\"capacity_range\":{\"required_bytes\":21474836480}}",
	     RPC_INVALID_ARGUMENT},
	    {"ControllerModifyVolume",
	     "{\"volume_id\":\"%s\",\"mutable_parameters\":{\"iops\":\"6000\"}}",
	     RPC_INVALID_ARGUMENT},
	    {"CreateSnapshot", "{\"name\":\"s1\",\"source_volume_id\":\"%s\"}",
	     RPC_INVALID_ARGUMENT},
	    {"DeleteSnapshot", "{\"snapshot_id\":\"%s\"}", RPC_OK},
	    {"ListSnapshots", "{\"snapshot_id\":\"%s\"}", RPC_OK},
	    {"ListSnapshots", "{\"source_volume_id\":\"%s\"}", RPC_OK},
	};
	/* JSON-escaped; none is valid as a volume, snapshot or instance id, zone, zone id or ARN */
	static const char *const bad[] = {
	    "i-123\\n;rm",	   "<html><body>404</body></html>", "vol-0123456789ABCDEF0",
	    "snap-0123",	   "i-0123456789abcdef0 ",	   "vol-0123456789abcdef0\\t",
	    "us-east-1a\\n", NULL /* 100 KB */};
	struct env e;
	char msg[512];

	sim_reset();
	ASSERT_OK(env_start(&e, 0));
	_cleanup_free_ char *big = malloc(BIG + 1);
	ASSERT_NOT_NULL(big);
	memset(big, 'f', BIG);
	memcpy(big, "snap-", 5);
	big[BIG] = '\0';
	int before = S.n_requests;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		for (size_t j = 0; j < ARRAY_SIZE(bad); j++) {
			_cleanup_free_ char *rq = NULL;
			ASSERT_GE(asprintf(&rq, cases[i].fmt, bad[j] ? bad[j] : big), 0);
			msg[0] = '\0';
			int code = call(&e, cases[i].method, rq, NULL, msg, sizeof(msg));
			if (code != cases[i].code)
				fprintf(stderr, "    %s with bad[%zu]: %d (%s)\n", cases[i].method, j,
					code, msg);
			ASSERT_EQ(code, cases[i].code);
			if (code == RPC_INVALID_ARGUMENT) {
				ASSERT_CONTAINS(msg, "is malformed");
				ASSERT_NULL(strchr(msg, '\n'));
				ASSERT_LT(strlen(msg), 200);
			}
		}
	}
	ASSERT_EQ(S.n_requests - before, 0);
	/* the checks let well-formed ids through to EC2 */
	ASSERT_EQ(call(&e, "ControllerGetVolume", "{\"volume_id\":\"vol-0123456789abcdef0\"}", NULL,
		       msg, sizeof(msg)),
		  RPC_NOT_FOUND);
	ASSERT_GT(S.n_requests - before, 0);
	env_stop(&e);
}

/* --metadata-sources=kubernetes: the region of the Node the controller runs on */
TEST(csi_ctrl_region_of_node)
{
	static const struct {
		const char *json;
		int want;
		const char *region;
	} cases[] = {
	    {"{\"metadata\":{\"labels\":{\"topology.kubernetes.io/region\":\"eu-west-1\"}},"
	     "\"spec\":{\"providerID\":\"aws:///us-east-1a/i-0123456789abcdef0\"}}",
	     0, "eu-west-1"},
	    {"{\"metadata\":{\"labels\":{\"failure-domain.beta.kubernetes.io/region\":"
	     "\"us-west-1\"}}}",
	     0, "us-west-1"},
	    {"{\"spec\":{\"providerID\":\"aws:///us-gov-west-1b/i-0123456789abcdef0\"}}", 0,
	     "us-gov-west-1"},
	    {"{\"spec\":{\"providerID\":\"aws:///us-west-2-lax-1a/i-0123456789abcdef0\"}}", 0,
	     "us-west-2"},
	    {"{\"spec\":{\"providerID\":\"aws:////i-0123456789abcdef0\"}}", -ENODATA, NULL},
	    {"{\"spec\":{\"providerID\":\"gce://p/z/n\"}}", -ENODATA, NULL},
	    {"{}", -ENODATA, NULL},
	    {"{\"metadata\":{\"labels\":{\"topology.kubernetes.io/region\":\"<html>\"}}}",
	     -EBADMSG, NULL},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		cJSON *node = NULL;
		char region[CSI_REGION_MAX] = "", why[256] = "";
		ASSERT_OK(json_parse(cases[i].json, strlen(cases[i].json), &node, NULL));
		int r = csi_ctrl_region_of_node(node, region, why, sizeof(why));
		cJSON_Delete(node);
		ASSERT_EQ(r, cases[i].want);
		if (cases[i].region)
			ASSERT_STREQ(region, cases[i].region);
		else
			ASSERT_TRUE(why[0] != 0);
	}
}
