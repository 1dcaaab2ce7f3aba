/* The unary gRPC server and client (common/grpc), over a real unix socket. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/base/json.h"
#include "common/base/timeutil.h"
#include "common/csi/csi.pb-c.h"
#include "common/csi/plugin.h"
#include "common/grpc/client.h"
#include "common/grpc/pbjson.h"
#include "common/grpc/server.h"
#include "common/metrics/metrics.h"
#include "tests/unit/harness.h"

/* Waits up to ms (and the call's deadline), ending early when the server stops. */
static void wait_ms(struct rpc_call *call, int64_t ms)
{
	int64_t t = ms * NSEC_PER_MSEC, left = rpc_call_time_left_ns(call);
	cancel_wait(rpc_call_cancel(call), left < t ? (left > 0 ? left : 0) : t);
}

static int h_sleep(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	wait_ms(call, 300);
	return RPC_OK; /* empty reply */
}

/* Calls to /t.T/Block wait at the gate until a test opens it (or the server stops): a test
 * sees which calls run at once by counting those inside, not by the clock. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool open;
	int entered;
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0};

static int h_block(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	pthread_mutex_lock(&gate.lock);
	gate.entered++;
	pthread_cond_broadcast(&gate.cond);
	while (!gate.open && !rpc_call_stopping(call)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * NSEC_PER_MSEC;
		if (ts.tv_nsec >= NSEC_PER_SEC) {
			ts.tv_sec++;
			ts.tv_nsec -= NSEC_PER_SEC;
		}
		pthread_cond_timedwait(&gate.cond, &gate.lock, &ts);
	}
	pthread_mutex_unlock(&gate.lock);
	return RPC_OK; /* empty reply */
}

static void gate_set(bool open)
{
	pthread_mutex_lock(&gate.lock);
	gate.open = open;
	if (!open)
		gate.entered = 0;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.lock);
}

/* Waits up to 10 s for n calls inside the gate and for the server to count inflight calls. */
static bool gate_wait(struct rpc_server *s, int n, unsigned inflight)
{
	int64_t deadline = now_mono_ns() + 10 * NSEC_PER_SEC;
	bool ok = false;

	while (!ok && now_mono_ns() < deadline) {
		pthread_mutex_lock(&gate.lock);
		ok = gate.entered >= n;
		pthread_mutex_unlock(&gate.lock);
		ok = ok && rpc_server_inflight(s) >= inflight;
		if (!ok)
			sleep_ns(5 * NSEC_PER_MSEC);
	}
	return ok;
}

static int h_wait(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	wait_ms(call, 10000);
	if (rpc_call_stopping(call))
		return rpc_call_error(call, RPC_ABORTED, "stopping");
	return RPC_OK;
}

static int h_fail(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	const Csi__V1__DeleteVolumeRequest *req = (const void *)in;
	return rpc_call_error(call, RPC_NOT_FOUND, "volume %s not found", req->volume_id);
}

static int h_info(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	Csi__V1__GetPluginInfoResponse *rep =
	    rpc_call_new(call, &csi__v1__get_plugin_info_response__descriptor);
	if (!rep)
		return rpc_call_error(call, RPC_RESOURCE_EXHAUSTED, "oom");
	rep->name = rpc_call_strdup(call, "test");
	for (int i = 0; i < 20; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%02d", i);
		if (rpc_call_map_add(call, &rep->base, "manifest", k, "v") < 0)
			return rpc_call_error(call, RPC_INTERNAL, "map");
	}
	if (rpc_call_map_add(call, &rep->base, "nosuchfield", "a", "b") != -EINVAL)
		return rpc_call_error(call, RPC_INTERNAL, "map on a missing field");
	*out = &rep->base;
	return RPC_OK;
}

static int h_wrong_reply(struct rpc_call *call, const ProtobufCMessage *in, ProtobufCMessage **out)
{
	*out = rpc_call_new(call, &csi__v1__probe_response__descriptor);
	return RPC_OK;
}

static const struct rpc_method test_methods[] = {
    {"/t.T/Sleep", &csi__v1__probe_request__descriptor, &csi__v1__probe_response__descriptor,
     h_sleep},
    {"/t.T/Block", &csi__v1__probe_request__descriptor, &csi__v1__probe_response__descriptor,
     h_block},
    {"/t.T/Wait", &csi__v1__probe_request__descriptor, &csi__v1__probe_response__descriptor,
     h_wait},
    {"/t.T/Fail", &csi__v1__delete_volume_request__descriptor,
     &csi__v1__delete_volume_response__descriptor, h_fail},
    {"/t.T/Info", &csi__v1__get_plugin_info_request__descriptor,
     &csi__v1__get_plugin_info_response__descriptor, h_info},
    {"/t.T/Wrong", &csi__v1__get_plugin_info_request__descriptor,
     &csi__v1__get_plugin_info_response__descriptor, h_wrong_reply},
    {NULL},
};

static struct csi_identity test_id = {
    .name = "test.csi.example.com", .version = "v9", .controller = true};

static int start_under(struct cancel *parent, struct rpc_server **ret, char *endpoint, size_t n)
{
	int r;
	snprintf(endpoint, n, "unix://%s/csi.sock", test_tmpdir());
	if ((r = rpc_server_new(&(struct rpc_server_opts){.endpoint = endpoint,
							  .grace_ns = 5 * NSEC_PER_SEC,
							  .cancel = parent},
				ret)) < 0)
		return r;
	if ((r = rpc_server_register(*ret, csi_identity_methods, &test_id)) < 0 ||
	    (r = rpc_server_register(*ret, test_methods, NULL)) < 0)
		return r;
	return rpc_server_start(*ret);
}

static int start(struct rpc_server **ret, char *endpoint, size_t n)
{
	return start_under(NULL, ret, endpoint, n);
}

TEST(grpc_endpoint_parse)
{
	char t[256], p[256];

	ASSERT_OK(rpc_endpoint_parse("unix:///csi/csi.sock", t, sizeof(t), p, sizeof(p)));
	ASSERT_STREQ(t, "unix:/csi/csi.sock");
	ASSERT_STREQ(p, "/csi/csi.sock");
	ASSERT_OK(rpc_endpoint_parse("unix://tmp/csi.sock", t, sizeof(t), p, sizeof(p)));
	ASSERT_STREQ(p, "/tmp/csi.sock");
	ASSERT_OK(rpc_endpoint_parse("unix:/a/b", t, sizeof(t), p, sizeof(p)));
	ASSERT_STREQ(p, "/a/b");
	ASSERT_OK(rpc_endpoint_parse("/a/b.sock", t, sizeof(t), p, sizeof(p)));
	ASSERT_STREQ(t, "unix:/a/b.sock");
	ASSERT_OK(rpc_endpoint_parse("tcp://127.0.0.1:10000", t, sizeof(t), p, sizeof(p)));
	ASSERT_STREQ(t, "127.0.0.1:10000");
	ASSERT_STREQ(p, "");
	ASSERT_ERR(rpc_endpoint_parse("unix:relative.sock", t, sizeof(t), p, sizeof(p)), EINVAL);
	ASSERT_ERR(rpc_endpoint_parse("http://x:1", t, sizeof(t), p, sizeof(p)), EINVAL);
	ASSERT_ERR(rpc_endpoint_parse("", t, sizeof(t), p, sizeof(p)), EINVAL);
	ASSERT_ERR(rpc_endpoint_parse("tcp://host:99999", t, sizeof(t), p, sizeof(p)), EINVAL);
	ASSERT_EQ(rpc_code_from_name("InvalidArgument"), RPC_INVALID_ARGUMENT);
	ASSERT_EQ(rpc_code_from_name("NOT_FOUND"), RPC_NOT_FOUND);
	ASSERT_EQ(rpc_code_from_name("10"), RPC_ABORTED);
	ASSERT_STREQ(rpc_code_name(RPC_RESOURCE_EXHAUSTED), "ResourceExhausted");
}

TEST(grpc_server_calls_and_errors)
{
	struct rpc_server *s;
	struct rpc_client *c;
	char ep[512];
	struct rpc_status st;
	ProtobufCMessage *rep = NULL;
	Csi__V1__GetPluginInfoRequest info = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__DeleteVolumeRequest del = CSI__V1__DELETE_VOLUME_REQUEST__INIT;

	ASSERT_OK(start(&s, ep, sizeof(ep)));
	ASSERT_OK(rpc_client_new(ep, &c));

	ASSERT_OK(rpc_client_call(c, "/csi.v1.Identity/GetPluginInfo", &info.base,
				  &csi__v1__get_plugin_info_response__descriptor, 5 * NSEC_PER_SEC,
				  &rep, &st));
	ASSERT_EQ(st.code, RPC_OK);
	ASSERT_NOT_NULL(rep);
	Csi__V1__GetPluginInfoResponse *pi = (void *)rep;
	ASSERT_STREQ(pi->name, "test.csi.example.com");
	ASSERT_STREQ(pi->vendor_version, "v9");
	protobuf_c_message_free_unpacked(rep, NULL);
	rep = NULL;

	/* a map built with rpc_call_map_add */
	ASSERT_OK(rpc_client_call(c, "/t.T/Info", &info.base,
				  &csi__v1__get_plugin_info_response__descriptor, 5 * NSEC_PER_SEC,
				  &rep, &st));
	ASSERT_EQ(st.code, RPC_OK);
	ASSERT_EQ(((Csi__V1__GetPluginInfoResponse *)rep)->n_manifest, 20);
	ASSERT_STREQ(rpc_msg_map_get(rep, "manifest", "k19"), "v");
	protobuf_c_message_free_unpacked(rep, NULL);
	rep = NULL;

	/* a handler's error */
	del.volume_id = (char *)"vol-1";
	ASSERT_OK(rpc_client_call(c, "/t.T/Fail", &del.base,
				  &csi__v1__delete_volume_response__descriptor, 5 * NSEC_PER_SEC,
				  &rep, &st));
	ASSERT_EQ(st.code, RPC_NOT_FOUND);
	ASSERT_STREQ(st.message, "volume vol-1 not found");
	ASSERT_NULL(rep);

	/* an unknown method */
	ASSERT_OK(rpc_client_call(c, "/csi.v1.Controller/GetCapacity", &info.base,
				  &csi__v1__get_capacity_response__descriptor, 5 * NSEC_PER_SEC,
				  &rep, &st));
	ASSERT_EQ(st.code, RPC_UNIMPLEMENTED);

	/* a handler replying with the wrong type */
	ASSERT_OK(rpc_client_call(c, "/t.T/Wrong", &info.base,
				  &csi__v1__get_plugin_info_response__descriptor, 5 * NSEC_PER_SEC,
				  &rep, &st));
	ASSERT_EQ(st.code, RPC_INTERNAL);

	/* garbage bytes, a NUL in a string, invalid UTF-8 */
	struct buf out = BUF_INIT(0);
	static const char garbage[] = "\xff\xff\xff\xff\xff\x01\x02";
	ASSERT_OK(rpc_client_call_raw(c, "/t.T/Fail", garbage, sizeof(garbage) - 1,
				      5 * NSEC_PER_SEC, &out, &st));
	ASSERT_EQ(st.code, RPC_INVALID_ARGUMENT);
	static const char nul[] = "\x0a\x03"
				  "a\0b";
	ASSERT_OK(rpc_client_call_raw(c, "/t.T/Fail", nul, 5, 5 * NSEC_PER_SEC, &out, &st));
	ASSERT_EQ(st.code, RPC_INVALID_ARGUMENT);
	static const char badutf[] = "\x0a\x02\xc3\x28";
	ASSERT_OK(rpc_client_call_raw(c, "/t.T/Fail", badutf, 4, 5 * NSEC_PER_SEC, &out, &st));
	ASSERT_EQ(st.code, RPC_INVALID_ARGUMENT);
	static const char good[] = "\x0a\x02\xc3\xa9"; /* "é" */
	ASSERT_OK(rpc_client_call_raw(c, "/t.T/Fail", good, 4, 5 * NSEC_PER_SEC, &out, &st));
	ASSERT_EQ(st.code, RPC_NOT_FOUND);
	/* an empty request is a valid message */
	ASSERT_OK(rpc_client_call_raw(c, "/t.T/Fail", "", 0, 5 * NSEC_PER_SEC, &out, &st));
	ASSERT_EQ(st.code, RPC_NOT_FOUND);
	buf_release(&out);

	rpc_client_free(c);
	rpc_server_free(s);
	struct stat sb;
	ASSERT_TRUE(stat(ep + 7, &sb) < 0); /* the socket is gone */
}

struct bg_call {
	const char *ep;
	const char *method; /* NULL: /t.T/Sleep */
	struct rpc_status st;
	int r;
	int64_t took;
};

static void *bg_call_method(struct bg_call *b, const char *method)
{
	struct rpc_client *c;
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	ProtobufCMessage *rep = NULL;
	int64_t t0 = now_mono_ns();

	if ((b->r = rpc_client_new(b->ep, &c)) < 0)
		return NULL;
	b->r = rpc_client_call(c, b->method ? b->method : method, &req.base, &csi__v1__probe_response__descriptor,
			       10 * NSEC_PER_SEC, &rep, &b->st);
	if (rep)
		protobuf_c_message_free_unpacked(rep, NULL);
	b->took = now_mono_ns() - t0;
	rpc_client_free(c);
	return NULL;
}

static void *bg_sleep(void *arg)
{
	return bg_call_method(arg, "/t.T/Sleep");
}

static void *bg_wait(void *arg)
{
	return bg_call_method(arg, "/t.T/Wait");
}

/* Eight calls are served at once: all eight are inside the handler together. The threads are
 * joined and the server freed before any assertion, so that a failure cannot leave threads that
 * write into this test's stack after it returned. */
TEST(grpc_server_concurrent_calls)
{
	struct rpc_server *s;
	char ep[512];
	pthread_t th[8];
	struct bg_call b[8];
	int started = 0;

	gate_set(false);
	ASSERT_OK(start(&s, ep, sizeof(ep)));
	for (; started < 8; started++) {
		b[started] = (struct bg_call){.ep = ep, .method = "/t.T/Block"};
		if (pthread_create(&th[started], NULL, bg_sleep, &b[started]) != 0)
			break;
	}
	bool together = gate_wait(s, 8, 8);
	gate_set(true);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 200 && rpc_server_inflight(s) > 0;
	     i++) /* the server counts after the close */
		sleep_ns(5 * NSEC_PER_MSEC);
	rpc_server_free(s);
	ASSERT_EQ(started, 8);
	ASSERT_TRUE(together);
	for (int i = 0; i < 8; i++) {
		ASSERT_OK(b[i].r);
		ASSERT_EQ(b[i].st.code, RPC_OK);
	}
	ASSERT_GE(metric_value(metric_counter("grpc_server_handled_total", "",
					      (const char *[]){"grpc_type", "grpc_service",
							       "grpc_method", "grpc_code", NULL}),
			       "unary", "t.T", "Block", "OK"),
		  8);
}

TEST(grpc_server_graceful_stop)
{
	struct rpc_server *s;
	char ep[512];
	pthread_t th;
	struct bg_call b;

	ASSERT_OK(start(&s, ep, sizeof(ep)));
	b = (struct bg_call){.ep = ep};
	if (pthread_create(&th, NULL, bg_sleep, &b) != 0) {
		rpc_server_free(s);
		ASSERT_TRUE(!"pthread_create");
	}
	for (int i = 0; i < 200 && rpc_server_inflight(s) == 0; i++)
		sleep_ns(5 * NSEC_PER_MSEC);
	unsigned inflight = rpc_server_inflight(s);
	int64_t t0 = now_mono_ns();
	rpc_server_stop(s); /* the call in flight finishes first (it ends early: stopping) */
	int64_t took = now_mono_ns() - t0;
	pthread_join(th, NULL); /* before any assertion: b is on this stack */
	ASSERT_EQ(inflight, 1);
	ASSERT_LT(took, 3 * NSEC_PER_SEC);
	ASSERT_OK(b.r);
	ASSERT_EQ(b.st.code, RPC_OK);
	rpc_server_free(s);
	struct stat sb;
	ASSERT_TRUE(stat(ep + 7, &sb) < 0);
}

TEST(grpc_server_stops_on_its_parent_token)
{
	struct rpc_server *s;
	struct cancel *parent;
	char ep[512];
	pthread_t th;
	struct bg_call b, after;

	ASSERT_OK(cancel_new(NULL, &parent));
	ASSERT_OK(start_under(parent, &s, ep, sizeof(ep)));
	b = (struct bg_call){.ep = ep};
	ASSERT_EQ(pthread_create(&th, NULL, bg_wait, &b), 0);
	for (int i = 0; i < 200 && rpc_server_inflight(s) == 0; i++)
		sleep_ns(5 * NSEC_PER_MSEC);
	ASSERT_EQ(rpc_server_inflight(s), 1);
	cancel_cancel(parent); /* a stop of the process, before the owner stops the server */
	pthread_join(th, NULL);
	/* the handler's wait ended at once; no new call is taken */
	after = (struct bg_call){.ep = ep};
	bg_wait(&after);
	rpc_server_free(s);
	cancel_free(parent);
	ASSERT_OK(b.r);
	ASSERT_EQ(b.st.code, RPC_ABORTED);
	ASSERT_LT(b.took, NSEC_PER_SEC);
	ASSERT_TRUE(after.r < 0 || after.st.code != RPC_OK);
	ASSERT_LT(after.took, 3 * NSEC_PER_SEC);
}

TEST(grpc_server_stale_and_busy_socket)
{
	struct rpc_server *s, *s2;
	char ep[512], path[256];
	int fd;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	/* a stale socket file (nobody listening) is replaced */
	snprintf(path, sizeof(path), "%s/csi.sock", test_tmpdir());
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	str_copy(sa.sun_path, sizeof(sa.sun_path), path);
	ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	ASSERT_OK(start(&s, ep, sizeof(ep)));
	/* a socket that answers is in use */
	ASSERT_OK(rpc_server_new(&(struct rpc_server_opts){.endpoint = ep}, &s2));
	ASSERT_ERR(rpc_server_start(s2), EADDRINUSE);
	rpc_server_free(s2);
	rpc_server_free(s);
	/* a regular file is never removed */
	FILE *f = fopen(path, "w");
	ASSERT_NOT_NULL(f);
	fclose(f);
	ASSERT_OK(rpc_server_new(&(struct rpc_server_opts){.endpoint = ep}, &s2));
	ASSERT_ERR(rpc_server_start(s2), ENOTSOCK);
	rpc_server_free(s2);
	unlink(path);
}

TEST(grpc_pbjson_roundtrip)
{
	const char *in = "{\"name\":\"pvc-1\",\"capacity_range\":{\"required_bytes\":10737418240},"
			 "\"volume_capabilities\":[{\"mount\":{\"fs_type\":\"xfs\",\"mount_flags\":"
			 "[\"noatime\"]},"
			 "\"access_mode\":{\"mode\":\"SINGLE_NODE_WRITER\"}},{\"block\":{},"
			 "\"accessMode\":{\"mode\":5}}],"
			 "\"parameters\":{\"type\":\"io2\",\"iops\":\"3000\"},\"secrets\":{"
			 "\"password\":\"hunter2\"},"
			 "\"accessibility_requirements\":{\"preferred\":[{\"segments\":{\"topology."
			 "kubernetes.io/zone\":\"us-east-1a\"}}]}}";
	cJSON *j = NULL;
	ProtobufCMessage *m = NULL;
	char err[256];

	ASSERT_OK(json_parse(in, strlen(in), &j, NULL));
	ASSERT_OK(
	    pbjson_to_msg(j, &csi__v1__create_volume_request__descriptor, &m, err, sizeof(err)));
	cJSON_Delete(j);
	Csi__V1__CreateVolumeRequest *req = (void *)m;
	ASSERT_STREQ(req->name, "pvc-1");
	ASSERT_EQ(req->capacity_range->required_bytes, 10737418240LL);
	ASSERT_EQ(req->n_volume_capabilities, 2);
	ASSERT_EQ(req->volume_capabilities[1]->access_type_case,
		  CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK);
	ASSERT_EQ(req->volume_capabilities[1]->access_mode->mode, 5);
	ASSERT_STREQ(rpc_msg_map_get(m, "parameters", "iops"), "3000");

	/* packing and unpacking keeps it */
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *bytes = malloc(n);
	protobuf_c_message_pack(m, bytes);
	ProtobufCMessage *m2 = NULL;
	ASSERT_OK(rpc_decode(&csi__v1__create_volume_request__descriptor, bytes, n, 0, &m2));
	free(bytes);
	char *a = pbjson_print(m, 0, false), *b = pbjson_print(m2, 0, false);
	ASSERT_STREQ(a, b);
	ASSERT_CONTAINS(a, "\"hunter2\"");
	free(a);
	free(b);
	/* redaction */
	a = pbjson_print(m2, PBJSON_REDACT, false);
	ASSERT_NOT_CONTAINS(a, "hunter2");
	ASSERT_NOT_CONTAINS(a, "noatime");
	ASSERT_CONTAINS(a, "\"secrets\":\"<redacted>\"");
	ASSERT_CONTAINS(a, "\"required_bytes\":10737418240");
	ASSERT_CONTAINS(a, "\"mode\":\"MULTI_NODE_MULTI_WRITER\"");
	free(a);
	protobuf_c_message_free_unpacked(m, NULL);
	protobuf_c_message_free_unpacked(m2, NULL);

	/* wrappers and errors */
	const char *probe = "{\"ready\":true}";
	ASSERT_OK(json_parse(probe, strlen(probe), &j, NULL));
	ASSERT_OK(pbjson_to_msg(j, &csi__v1__probe_response__descriptor, &m, err, sizeof(err)));
	cJSON_Delete(j);
	ASSERT_TRUE(((Csi__V1__ProbeResponse *)m)->ready->value);
	a = pbjson_print(m, 0, false);
	ASSERT_STREQ(a, "{\"ready\":true}");
	free(a);
	protobuf_c_message_free_unpacked(m, NULL);
	const char *bad = "{\"volume_capabilities\":[{\"access_mode\":{\"mode\":\"NOPE\"}}]}";
	ASSERT_OK(json_parse(bad, strlen(bad), &j, NULL));
	ASSERT_ERR(
	    pbjson_to_msg(j, &csi__v1__create_volume_request__descriptor, &m, err, sizeof(err)),
	    EINVAL);
	ASSERT_CONTAINS(err, "volume_capabilities.access_mode.mode");
	cJSON_Delete(j);
	/* two members of one oneof, a key twice: the last wins, nothing leaks */
	const char *twice =
	    "{\"name\":\"a\",\"name\":\"b\",\"volume_capabilities\":[{\"mount\":{\"fs_type\":"
	    "\"xfs\"},\"block\":{}}],"
	    "\"capacity_range\":{\"required_bytes\":1},\"capacity_range\":{\"limit_bytes\":2}}";
	ASSERT_OK(json_parse(twice, strlen(twice), &j, NULL));
	ASSERT_OK(
	    pbjson_to_msg(j, &csi__v1__create_volume_request__descriptor, &m, err, sizeof(err)));
	cJSON_Delete(j);
	req = (void *)m;
	ASSERT_STREQ(req->name, "b");
	ASSERT_EQ(req->volume_capabilities[0]->access_type_case,
		  CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK);
	ASSERT_EQ(req->capacity_range->required_bytes, 0);
	ASSERT_EQ(req->capacity_range->limit_bytes, 2);
	protobuf_c_message_free_unpacked(m, NULL);
	/* a failure deep inside frees what was built */
	const char *deep = "{\"volume_capabilities\":[{\"mount\":{\"fs_type\":1}}]}";
	ASSERT_OK(json_parse(deep, strlen(deep), &j, NULL));
	ASSERT_ERR(
	    pbjson_to_msg(j, &csi__v1__create_volume_request__descriptor, &m, err, sizeof(err)),
	    EINVAL);
	cJSON_Delete(j);
	const char *unknown = "{\"nope\":1}";
	ASSERT_OK(json_parse(unknown, strlen(unknown), &j, NULL));
	ASSERT_ERR(
	    pbjson_to_msg(j, &csi__v1__create_volume_request__descriptor, &m, err, sizeof(err)),
	    EINVAL);
	cJSON_Delete(j);
}

/* With both workers held inside handlers and two more calls queued behind them, a quiet call
 * (GetPluginInfo) is still answered: it does not wait in the queue. If it did, it would wait
 * for the gate, which opens only after it returned, and end on its 5 s deadline (the held calls
 * have 10 s). */
TEST(grpc_server_quiet_calls_skip_the_queue)
{
	struct rpc_server *s;
	struct rpc_client *c = NULL;
	char ep[512];
	pthread_t th[4];
	struct bg_call b[4];
	struct rpc_status st = {0};
	ProtobufCMessage *rep = NULL;
	Csi__V1__GetPluginInfoRequest info = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	int started = 0, r = -1;
	bool held = false;

	gate_set(false);
	snprintf(ep, sizeof(ep), "unix://%s/q.sock", test_tmpdir());
	ASSERT_OK(rpc_server_new(&(struct rpc_server_opts){.endpoint = ep, .max_workers = 2}, &s));
	ASSERT_OK(rpc_server_register(s, csi_identity_methods, &test_id));
	ASSERT_OK(rpc_server_register(s, test_methods, NULL));
	ASSERT_OK(rpc_server_start(s));
	for (; started < 4; started++) {
		b[started] = (struct bg_call){.ep = ep, .method = "/t.T/Block"};
		if (pthread_create(&th[started], NULL, bg_sleep, &b[started]) != 0)
			break;
	}
	/* two inside the handler, two queued */
	held = gate_wait(s, 2, 4);
	if (held && rpc_client_new(ep, &c) == 0)
		r = rpc_client_call(c, "/csi.v1.Identity/GetPluginInfo", &info.base,
				    &csi__v1__get_plugin_info_response__descriptor,
				    5 * NSEC_PER_SEC, &rep, &st);
	gate_set(true);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (rep)
		protobuf_c_message_free_unpacked(rep, NULL);
	rpc_client_free(c);
	rpc_server_free(s);
	ASSERT_EQ(started, 4);
	ASSERT_TRUE(held);
	ASSERT_OK(r);
	ASSERT_EQ(st.code, RPC_OK);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(b[i].st.code, RPC_OK);
}
