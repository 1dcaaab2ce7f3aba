/* The unary gRPC server: one completion-queue thread drives gRPC's C core, a pool of worker
 * threads (started on demand) decodes requests, runs handlers and encodes replies.
 *
 * A call goes through three batches on the completion queue, its state telling which one
 * completed: REQUEST (grpc_server_request_call: a new call arrived), RECV (its message), SEND
 * (reply or status sent, close received). Between RECV and SEND the call sits in the work
 * queue or runs on a worker. */
#include "common/grpc/server.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/base/tsan.h"
#include "common/grpc/pbjson.h"
#include "common/grpc/server_internal.h"
#include "common/metrics/metrics.h"

static void metrics_register(struct rpc_server *s)
{
	static const char *const l3[] = {"grpc_type", "grpc_service", "grpc_method", NULL};
	static const char *const l4[] = {"grpc_type", "grpc_service", "grpc_method", "grpc_code",
					 NULL};
	static const double buckets[] = {.001, .005, .01, .025, .05, .1, .25, .5,
					 1,    2.5,  5,	  10,	30,  60, 120};

	s->m_started = metric_counter("grpc_server_started_total",
				      "Total number of RPCs started on the server.", l3);
	s->m_handled = metric_counter(
	    "grpc_server_handled_total",
	    "Total number of RPCs completed on the server, regardless of success or failure.", l4);
	s->m_seconds = metric_histogram("grpc_server_handling_seconds",
					"Histogram of response latency (seconds) of gRPC that had "
					"been application-level handled by the server.",
					l3, buckets, ARRAY_SIZE(buckets));
}

/* ---- call lifecycle ---- */

static void call_free(struct rpc_call *c)
{
	if (!c)
		return;
	if (c->call)
		grpc_call_unref(c->call);
	grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->md);
	if (c->recv)
		grpc_byte_buffer_destroy(c->recv);
	if (c->send)
		grpc_byte_buffer_destroy(c->send);
	if (c->has_status_slice)
		grpc_slice_unref(c->status_slice);
	rpc_call_arena_free(c);
	for (unsigned i = 0; i < c->n_kv; i++) {
		free(c->kv_key[i]);
		free(c->kv_val[i]);
	}
	free(c->message);
	free(c);
}

static int request_new_call(struct rpc_server *s)
{
	struct rpc_call *c = calloc(1, sizeof(*c));
	grpc_call_error e;

	if (!c)
		return -ENOMEM;
	c->srv = s;
	c->state = ST_REQUEST;
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->md);
	tsan_release(c); /* c comes back as the tag of a completion, on the queue's thread */
	e = grpc_server_request_call(s->server, &c->call, &c->details, &c->md, s->cq, s->cq, c);
	if (e != GRPC_CALL_OK) {
		log_v(4, "grpc: request_call failed", KV_S("error", grpc_call_error_to_string(e)));
		call_free(c);
		return -EIO;
	}
	return 0;
}

static const struct reg *find_method(struct rpc_server *s, const char *path)
{
	for (size_t i = 0; i < s->n_regs; i++)
		if (strcmp(s->regs[i].m->path, path) == 0)
			return &s->regs[i];
	return NULL;
}

/* Sends the reply (c->send, may be NULL) or the status, and waits for close (state SEND). */
static void call_finish(struct rpc_call *c)
{
	grpc_op ops[4];
	size_t n = 0;
	grpc_call_error e;

	memset(ops, 0, sizeof(ops));
	ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
	n++;
	if (c->code == RPC_OK && c->send) {
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n].data.send_message.send_message = c->send;
		n++;
	}
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = (grpc_status_code)c->code;
	if (c->code != RPC_OK) {
		c->status_slice =
		    grpc_slice_from_copied_string(c->message ? c->message : rpc_code_name(c->code));
		c->has_status_slice = true;
		ops[n].data.send_status_from_server.status_details = &c->status_slice;
	}
	n++;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n].data.recv_close_on_server.cancelled = &c->cancelled;
	n++;
	c->state = ST_SEND;
	grpc_call *call = c->call; /* read before c is handed over */
	tsan_release(c);
	e = grpc_call_start_batch(call, ops, n, c, NULL);
	if (e != GRPC_CALL_OK) {
		/* The completion will never come: account for the call here. */
		struct rpc_server *s = c->srv;
		log_v(2, "grpc: start_batch failed", KV_S("method", c->path),
		      KV_S("error", grpc_call_error_to_string(e)));
		call_free(c);
		pthread_mutex_lock(&s->lock);
		s->inflight--;
		pthread_cond_broadcast(&s->idle_cond);
		pthread_mutex_unlock(&s->lock);
	}
}

static int read_byte_buffer(grpc_byte_buffer *bb, uint8_t **ret, size_t *ret_len)
{
	grpc_byte_buffer_reader rd;
	grpc_slice sl;

	if (!grpc_byte_buffer_reader_init(&rd, bb))
		return -EBADMSG;
	sl = grpc_byte_buffer_reader_readall(&rd);
	grpc_byte_buffer_reader_destroy(&rd);
	size_t n = GRPC_SLICE_LENGTH(sl);
	uint8_t *d = malloc(n ? n : 1);
	if (!d) {
		grpc_slice_unref(sl);
		return -ENOMEM;
	}
	memcpy(d, GRPC_SLICE_START_PTR(sl), n);
	grpc_slice_unref(sl);
	*ret = d;
	*ret_len = n;
	return 0;
}

static const char *const id_fields[MAX_LOG_IDS] = {
    "volume_id", "node_id", "snapshot_id", "source_volume_id", "name", "target_path",
};

/* Decodes, runs the handler, encodes: on a worker thread. */
static void call_process(struct rpc_call *c)
{
	struct rpc_server *s = c->srv;
	ProtobufCMessage *req = NULL, *rep = NULL;
	uint8_t *data = NULL;
	size_t len = 0;
	int r;

	c->code = RPC_OK;
	if ((r = read_byte_buffer(c->recv, &data, &len)) < 0) {
		rpc_call_error(c, RPC_INTERNAL, "cannot read the request: %s", strerror(-r));
		goto out;
	}
	r = rpc_decode(c->m->request, data, len, s->opts.max_message, &req);
	free(data);
	if (r < 0) {
		rpc_call_error(c, r == -EMSGSIZE ? RPC_RESOURCE_EXHAUSTED : RPC_INVALID_ARGUMENT,
			       "the request is not a valid %s message", c->m->request->name);
		goto out;
	}
	for (unsigned i = 0; i < MAX_LOG_IDS; i++) {
		/* "name" only where it names a volume or snapshot to create */
		const char *v = rpc_msg_str(req, id_fields[i]);
		if (v)
			rpc_call_log_kv(c, id_fields[i], v);
	}
	if (log_enabled(5)) {
		char *j = pbjson_print(req, PBJSON_REDACT, false);
		log_info("grpc request", KV_S("method", c->path), KV_S("request", j ? j : "?"));
		free(j);
	}
	r = c->m->handler(c, req, &rep);
	if (r < 0) /* a handler that returned -errno */
		rpc_call_error(c, RPC_INTERNAL, "%s", strerror(-r));
	else if (r > RPC_CODE_MAX)
		rpc_call_error(c, RPC_UNKNOWN, "handler returned status %d", r);
	else if (r != RPC_OK) {
		c->code = r;
		if (!c->message)
			rpc_call_error(c, r, "%s", rpc_code_name(r));
	} else {
		c->code = RPC_OK;
		ProtobufCMessage *out = rep;
		if (!out && !(out = rpc_call_new(c, c->m->reply))) {
			rpc_call_error(c, RPC_RESOURCE_EXHAUSTED, "out of memory");
			goto out;
		}
		if (out->descriptor != c->m->reply) {
			rpc_call_error(c, RPC_INTERNAL, "handler replied with %s instead of %s",
				       out->descriptor->name, c->m->reply->name);
			goto out;
		}
		if (log_enabled(5)) {
			char *j = pbjson_print(out, PBJSON_REDACT, false);
			log_info("grpc reply", KV_S("method", c->path), KV_S("reply", j ? j : "?"));
			free(j);
		}
		size_t sz = protobuf_c_message_get_packed_size(out);
		if (sz > s->opts.max_message) {
			rpc_call_error(c, RPC_RESOURCE_EXHAUSTED,
				       "reply of %zu bytes exceeds the limit of %zu", sz,
				       s->opts.max_message);
			goto out;
		}
		grpc_slice sl = grpc_slice_malloc(sz);
		protobuf_c_message_pack(out, GRPC_SLICE_START_PTR(sl));
		c->send = grpc_raw_byte_buffer_create(&sl, 1);
		grpc_slice_unref(sl);
	}
out:
	if (req)
		protobuf_c_message_free_unpacked(req, NULL);
	rpc_call_arena_free(c);
	call_finish(c);
}

static void *worker_main(void *arg)
{
	struct rpc_server *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->q_head && !s->workers_exit) {
			s->n_idle++;
			pthread_cond_wait(&s->cond, &s->lock);
			s->n_idle--;
		}
		if (!s->q_head)
			break;
		struct rpc_call *c = s->q_head;
		s->q_head = c->next;
		if (!s->q_head)
			s->q_tail = NULL;
		s->q_len--;
		pthread_mutex_unlock(&s->lock);
		call_process(c);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* Queues a call for the workers; false when the queue is full. */
static bool enqueue(struct rpc_server *s, struct rpc_call *c)
{
	pthread_mutex_lock(&s->lock);
	if (s->q_len >= s->opts.max_queued) {
		pthread_mutex_unlock(&s->lock);
		return false;
	}
	/* Quiet calls (health probes, capability queries) are quick and must not wait behind
	 * handlers blocked for minutes on AWS: they go first, and may start a worker or two
	 * past the limit. */
	bool urgent = c->m && c->m->quiet;
	c->next = NULL;
	if (urgent) {
		c->next = s->q_head;
		s->q_head = c;
		if (!s->q_tail)
			s->q_tail = c;
	} else {
		if (s->q_tail)
			s->q_tail->next = c;
		else
			s->q_head = c;
		s->q_tail = c;
	}
	s->q_len++;
	if (s->n_idle < s->q_len &&
	    s->n_workers < s->opts.max_workers + (urgent ? URGENT_WORKERS : 0)) {
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, 1 << 20);
		if (pthread_create(&s->workers[s->n_workers], &a, worker_main, s) == 0)
			s->n_workers++;
		else if (s->n_workers == 0)
			log_error("grpc: cannot start a worker thread");
		pthread_attr_destroy(&a);
	}
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return true;
}

static void split_path(struct rpc_call *c)
{
	/* "/pkg.Service/Method" -> service "pkg.Service", method "Method" */
	const char *slash = c->path[0] == '/' ? strchr(c->path + 1, '/') : NULL;

	if (!slash || !c->m) {
		str_copy(c->service, sizeof(c->service), "unknown");
		str_copy(c->method, sizeof(c->method), "unknown");
		return;
	}
	size_t n = (size_t)(slash - (c->path + 1));
	if (n >= sizeof(c->service))
		n = sizeof(c->service) - 1;
	memcpy(c->service, c->path + 1, n);
	c->service[n] = 0;
	str_copy(c->method, sizeof(c->method), slash + 1);
}

static void log_call(struct rpc_call *c)
{
	struct log_kv kv[4 + MAX_CALL_KV + 1];
	unsigned n = 0;
	double secs = (double)(now_mono_ns() - c->start_ns) / 1e9;
	enum log_level lvl = LOG_INFO;

	kv[n++] = KV_S("method", c->path);
	for (unsigned i = 0; i < c->n_kv; i++)
		kv[n++] = KV_S(c->kv_key[i], c->kv_val[i]);
	kv[n++] = KV_D("duration", secs);
	kv[n++] = KV_S("code", rpc_code_name(c->code));
	if (c->code != RPC_OK)
		kv[n++] = KV_S("error", c->message ? c->message : "");
	kv[n] = LOG_END;
	if (c->code == RPC_OK && c->m && c->m->quiet && !log_enabled(4))
		return;
	if (c->code == RPC_INTERNAL || c->code == RPC_UNKNOWN || c->code == RPC_DATA_LOSS)
		lvl = LOG_ERROR;
	else if (c->code != RPC_OK)
		lvl = LOG_WARNING;
	log_emit(lvl, __FILE__, __LINE__, "grpc call", kv);
}

static void on_request(struct rpc_server *s, struct rpc_call *c, bool ok)
{
	if (!ok) { /* shutting down */
		call_free(c);
		return;
	}
	if (!cancel_is_cancelled(s->cancel))
		request_new_call(s);
	pthread_mutex_lock(&s->lock);
	s->inflight++;
	pthread_mutex_unlock(&s->lock);

	c->start_ns = now_mono_ns();
	size_t ml = GRPC_SLICE_LENGTH(c->details.method);
	if (ml >= sizeof(c->path))
		ml = sizeof(c->path) - 1;
	memcpy(c->path, GRPC_SLICE_START_PTR(c->details.method), ml);
	c->path[ml] = 0;
	c->deadline_ns = INT64_MAX;
	if (gpr_time_cmp(c->details.deadline, gpr_inf_future(c->details.deadline.clock_type)) !=
	    0) {
		gpr_timespec dl = gpr_convert_clock_type(c->details.deadline, GPR_CLOCK_MONOTONIC);
		gpr_timespec left = gpr_time_sub(dl, gpr_now(GPR_CLOCK_MONOTONIC));
		c->deadline_ns = c->start_ns + left.tv_sec * NSEC_PER_SEC + left.tv_nsec;
	}
	const struct reg *reg = find_method(s, c->path);
	if (reg) {
		c->m = reg->m;
		c->ud = reg->ud;
	}
	split_path(c);
	metric_inc(s->m_started, "unary", c->service, c->method);
	if (!reg) {
		rpc_call_error(c, RPC_UNIMPLEMENTED, "unknown method %s", c->path);
		call_finish(c);
		return;
	}
	grpc_op op;
	memset(&op, 0, sizeof(op));
	op.op = GRPC_OP_RECV_MESSAGE;
	op.data.recv_message.recv_message = &c->recv;
	c->state = ST_RECV;
	grpc_call *call = c->call; /* read before c is handed over */
	tsan_release(c);
	if (grpc_call_start_batch(call, &op, 1, c, NULL) != GRPC_CALL_OK) {
		rpc_call_error(c, RPC_INTERNAL, "cannot receive the request");
		call_finish(c);
	}
}

static void on_recv(struct rpc_server *s, struct rpc_call *c, bool ok)
{
	if (!ok || !c->recv) {
		rpc_call_error(c, RPC_INVALID_ARGUMENT, "no request message");
		call_finish(c);
		return;
	}
	if (!enqueue(s, c)) {
		rpc_call_error(c, RPC_RESOURCE_EXHAUSTED, "too many calls queued (%u)",
			       s->opts.max_queued);
		call_finish(c);
	}
}

static void on_sent(struct rpc_server *s, struct rpc_call *c, bool ok)
{
	double secs = (double)(now_mono_ns() - c->start_ns) / 1e9;

	if (c->cancelled && c->code == RPC_OK) {
		/* The caller went away (or its deadline passed) before the reply arrived. */
		rpc_call_error(c, RPC_CANCELLED, "cancelled by the caller or its deadline");
	}
	metric_inc(s->m_handled, "unary", c->service, c->method, rpc_code_name(c->code));
	metric_observe(s->m_seconds, secs, "unary", c->service, c->method);
	log_call(c);
	call_free(c);
	pthread_mutex_lock(&s->lock);
	s->inflight--;
	pthread_cond_broadcast(&s->idle_cond);
	pthread_mutex_unlock(&s->lock);
}

static void *cq_main(void *arg)
{
	struct rpc_server *s = arg;

	for (;;) {
		grpc_event ev =
		    grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		tsan_acquire(ev.tag); /* from the thread that started the operation */
		if (ev.tag == &s->shutdown_tag) {
			pthread_mutex_lock(&s->lock);
			s->shutdown_done = true;
			pthread_cond_broadcast(&s->idle_cond);
			pthread_mutex_unlock(&s->lock);
			continue;
		}
		struct rpc_call *c = ev.tag;
		switch (c->state) {
		case ST_REQUEST:
			on_request(s, c, ev.success);
			break;
		case ST_RECV:
			on_recv(s, c, ev.success);
			break;
		case ST_SEND:
			on_sent(s, c, ev.success);
			break;
		}
	}
	return NULL;
}

/* ---- server ---- */

int rpc_server_new(const struct rpc_server_opts *opts, struct rpc_server **ret)
{
	struct rpc_server *s;
	int r;

	if (!opts || !opts->endpoint)
		return -EINVAL;
	if (!(s = calloc(1, sizeof(*s))))
		return -ENOMEM;
	s->opts = *opts;
	if (!s->opts.max_workers)
		s->opts.max_workers = 16;
	if (!s->opts.max_queued)
		s->opts.max_queued = 256;
	if (!s->opts.max_message)
		s->opts.max_message = 4 << 20;
	if (!s->opts.grace_ns)
		s->opts.grace_ns = 30 * NSEC_PER_SEC;
	if (!s->opts.socket_mode)
		s->opts.socket_mode = 0660;
	s->opts.endpoint = NULL; /* not kept */
	if ((r = rpc_endpoint_parse(opts->endpoint, s->target, sizeof(s->target), s->path,
				    sizeof(s->path))) < 0) {
		free(s);
		return r;
	}
	if (!(s->workers = calloc(s->opts.max_workers + URGENT_WORKERS, sizeof(*s->workers)))) {
		free(s);
		return -ENOMEM;
	}
	if ((r = cancel_new(opts->cancel, &s->cancel)) < 0) {
		free(s->workers);
		free(s);
		return r;
	}
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	pthread_cond_init(&s->idle_cond, &ca);
	pthread_condattr_destroy(&ca);
	metrics_register(s);
	*ret = s;
	return 0;
}

int rpc_server_register(struct rpc_server *s, const struct rpc_method *table, void *userdata)
{
	size_t n = 0;

	if (s->started)
		return -EBUSY;
	while (table[n].path)
		n++;
	for (size_t i = 0; i < n; i++) {
		if (!table[i].request || !table[i].reply || !table[i].handler)
			return -EINVAL;
		if (find_method(s, table[i].path))
			return -EEXIST;
		for (size_t k = 0; k < i; k++)
			if (strcmp(table[k].path, table[i].path) == 0)
				return -EEXIST;
	}
	struct reg *nr = realloc(s->regs, (s->n_regs + n) * sizeof(*nr));
	if (!nr && n)
		return -ENOMEM;
	s->regs = nr;
	for (size_t i = 0; i < n; i++)
		s->regs[s->n_regs++] = (struct reg){&table[i], userdata};
	return 0;
}

/* A socket file left by a previous run is removed; one that answers is in use. */
static int clear_stale_socket(const char *path)
{
	struct stat st;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, r;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -ENOTSOCK;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	str_copy(sa.sun_path, sizeof(sa.sun_path), path);
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	if (r == 0)
		return -EADDRINUSE;
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* No new calls: gRPC's shutdown begins (once, whoever asks first). */
static void begin_shutdown(struct rpc_server *s)
{
	pthread_mutex_lock(&s->lock);
	bool first = !s->shutdown_begun;
	s->shutdown_begun = true;
	pthread_mutex_unlock(&s->lock);
	if (first)
		grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
}

/* Begins the shutdown as soon as the server's token is cancelled: by rpc_server_stop, or by
 * the parent token (a stop of the process) before the owner gets there. */
static void *stop_main(void *arg)
{
	struct rpc_server *s = arg;

	cancel_wait(s->cancel, -1);
	log_v(2, "grpc: stopping, no new calls", KV_U("calls", rpc_server_inflight(s)));
	begin_shutdown(s);
	return NULL;
}

int rpc_server_start(struct rpc_server *s)
{
	grpc_server_credentials *creds;
	grpc_arg args[3];
	int r, port;

	if (s->started)
		return -EALREADY;
	if (*s->path && (r = clear_stale_socket(s->path)) < 0)
		return r;
	rpc_global_acquire();
	args[0] = (grpc_arg){.type = GRPC_ARG_INTEGER,
			     .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
			     .value.integer = (int)s->opts.max_message};
	args[1] = (grpc_arg){.type = GRPC_ARG_INTEGER,
			     .key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
			     .value.integer = (int)s->opts.max_message};
	args[2] = (grpc_arg){.type = GRPC_ARG_INTEGER,
			     .key = (char *)GRPC_ARG_MAX_CONCURRENT_STREAMS,
			     .value.integer = 1000};
	grpc_channel_args ca = {.num_args = 3, .args = args};
	s->cq = grpc_completion_queue_create_for_next(NULL);
	s->server = grpc_server_create(&ca, NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);
	creds = grpc_insecure_server_credentials_create();
	port = grpc_server_add_http2_port(s->server, s->target, creds);
	grpc_server_credentials_release(creds);
	if (port <= 0) {
		grpc_server_destroy(s->server);
		grpc_completion_queue_shutdown(s->cq);
		while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
			   .type != GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(s->cq);
		s->server = NULL;
		s->cq = NULL;
		rpc_global_release();
		return -EADDRNOTAVAIL;
	}
	s->port = *s->path ? 0 : port;
	grpc_server_start(s->server);
	if (*s->path && chmod(s->path, s->opts.socket_mode) < 0)
		log_v(2, "grpc: cannot chmod the socket", KV_S("path", s->path), KV_E(-errno));
	for (int i = 0; i < PENDING_REQUESTS; i++)
		request_new_call(s);
	if ((r = pthread_create(&s->cq_thread, NULL, cq_main, s)) != 0) {
		/* Without the thread nothing can run: shut down synchronously. */
		begin_shutdown(s);
		grpc_server_cancel_all_calls(s->server);
		grpc_completion_queue_shutdown(s->cq);
		for (;;) {
			grpc_event ev = grpc_completion_queue_next(
			    s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
			if (ev.type == GRPC_QUEUE_SHUTDOWN)
				break;
			if (ev.type == GRPC_OP_COMPLETE && ev.tag != &s->shutdown_tag) {
				tsan_acquire(ev.tag);
				call_free(ev.tag);
			}
		}
		grpc_server_destroy(s->server);
		grpc_completion_queue_destroy(s->cq);
		s->server = NULL;
		s->cq = NULL;
		rpc_global_release();
		return -r;
	}
	s->started = true;
	/* without it, a cancelled parent only tells the handlers; rpc_server_stop shuts down */
	if ((r = pthread_create(&s->stop_thread, NULL, stop_main, s)) == 0)
		s->stop_thread_running = true;
	else
		log_warn("grpc: cannot start the stop thread", KV_E(-r));
	return 0;
}

/* Waits until no call is in flight (and the shutdown is done), or the deadline (monotonic);
 * idle_cond is broadcast whenever either changes. */
static void wait_idle(struct rpc_server *s, int64_t deadline, bool need_shutdown)
{
	struct timespec ts = {.tv_sec = deadline / NSEC_PER_SEC, .tv_nsec = deadline % NSEC_PER_SEC};

	pthread_mutex_lock(&s->lock);
	while (s->inflight > 0 || (need_shutdown && !s->shutdown_done))
		if (pthread_cond_timedwait(&s->idle_cond, &s->lock, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&s->lock);
}

void rpc_server_stop(struct rpc_server *s)
{
	if (!s || !s->started || s->stopped)
		return;
	s->stopped = true;
	cancel_cancel(s->cancel); /* handlers see rpc_call_stopping() at once */
	if (s->stop_thread_running) {
		pthread_join(s->stop_thread, NULL);
		s->stop_thread_running = false;
	}
	begin_shutdown(s);
	wait_idle(s, now_mono_ns() + s->opts.grace_ns, false);
	if (s->inflight)
		log_warn("grpc: calls still running after the grace period, cancelling them",
			 KV_U("calls", s->inflight));
	/* Cancels what is left and closes idle connections, so that the shutdown completes. */
	grpc_server_cancel_all_calls(s->server);
	wait_idle(s, now_mono_ns() + 10 * NSEC_PER_SEC, true);
	pthread_mutex_lock(&s->lock);
	bool stuck = s->inflight > 0 || !s->shutdown_done;
	s->workers_exit = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (stuck) {
		/* A handler ignores rpc_call_stopping(): leave everything as it is (the process is
		 * about to exit) rather than free what a thread still uses. */
		log_error("grpc: handlers did not finish, leaving the server behind",
			  KV_U("calls", s->inflight));
		s->leaked = true;
		return;
	}
	grpc_completion_queue_shutdown(s->cq);
	pthread_join(s->cq_thread, NULL);
	for (unsigned i = 0; i < s->n_workers; i++)
		pthread_join(s->workers[i], NULL);
	grpc_server_destroy(s->server);
	grpc_completion_queue_destroy(s->cq);
	s->server = NULL;
	s->cq = NULL;
	if (*s->path) {
		struct stat st;
		if (lstat(s->path, &st) == 0 && S_ISSOCK(st.st_mode))
			unlink(s->path);
	}
	rpc_global_release();
}

void rpc_server_free(struct rpc_server *s)
{
	if (!s)
		return;
	rpc_server_stop(s);
	if (s->leaked)
		return;
	cancel_free(s->cancel);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	pthread_cond_destroy(&s->idle_cond);
	free(s->workers);
	free(s->regs);
	free(s);
}

const char *rpc_server_socket_path(const struct rpc_server *s)
{
	return s->path;
}

int rpc_server_port(const struct rpc_server *s)
{
	return s->port;
}

unsigned rpc_server_inflight(struct rpc_server *s)
{
	unsigned n;

	pthread_mutex_lock(&s->lock);
	n = s->inflight;
	pthread_mutex_unlock(&s->lock);
	return n;
}
