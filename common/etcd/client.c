/* etcd v3 over the JSON gateway: transport, errors, members, kv and maintenance (etcd.h). */
#include "common/etcd/etcd.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/base64.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/etcd/internal.h"
#include "common/http/client.h"

#define DEFAULT_TIMEOUT_NS (5 * NSEC_PER_SEC)
#define DEFAULT_CONNECT_TIMEOUT_NS (2 * NSEC_PER_SEC)
#define MAX_REPLY ((size_t)4 << 20)
#define MAX_ENDPOINTS 16

struct etcd_client {
	struct http_client *http;
	char **endpoints;
	size_t n;
	int64_t timeout_ns;
	atomic_size_t preferred;
	atomic_ulong calls;
};

int etcd_client_new(const struct etcd_client_opts *opts, struct etcd_client **ret)
{
	struct etcd_client *c;
	size_t n;
	int r;

	if (!opts || !ret || !opts->endpoints || !opts->endpoints[0] || opts->timeout_ns < 0 ||
	    opts->connect_timeout_ns < 0)
		return -EINVAL;
	n = strv_len(opts->endpoints);
	if (n > MAX_ENDPOINTS)
		return -E2BIG;
	for (size_t i = 0; i < n; i++)
		if (!str_has_prefix(opts->endpoints[i], "http://") &&
		    !str_has_prefix(opts->endpoints[i], "https://"))
			return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->n = n;
	c->timeout_ns = opts->timeout_ns ? opts->timeout_ns : DEFAULT_TIMEOUT_NS;
	for (size_t i = 0; i < n; i++) {
		if (strv_push(&c->endpoints, opts->endpoints[i]) < 0) {
			etcd_client_free(c);
			return -ENOMEM;
		}
	}
	r = http_client_new(&(struct http_client_opts){
				.connect_timeout_ns = opts->connect_timeout_ns
							  ? opts->connect_timeout_ns
							  : DEFAULT_CONNECT_TIMEOUT_NS,
				.timeout_ns = c->timeout_ns,
				.ca_file = opts->ca_file,
				.cert_file = opts->cert_file,
				.key_file = opts->key_file,
				.max_response = MAX_REPLY,
			    },
			    &c->http);
	if (r < 0) {
		etcd_client_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

void etcd_client_free(struct etcd_client *c)
{
	if (!c)
		return;
	http_client_free(c->http);
	strv_free(c->endpoints);
	free(c);
}

unsigned long etcd_client_calls(const struct etcd_client *c)
{
	return c ? atomic_load(&((struct etcd_client *)c)->calls) : 0;
}

char *const *etcd_client_endpoints(const struct etcd_client *c)
{
	return c->endpoints;
}

/* ---- errors ---- */

static void err_set(struct etcd_error *err, int code, long status, const char *msg)
{
	if (!err)
		return;
	err->code = code;
	err->http_status = status;
	str_copy(err->message, sizeof(err->message), msg ? msg : "");
}

int etcd_code_errno(int code, const char *msg)
{
	msg = msg ? msg : "";
	switch (code) {
	case 3:
		return -EINVAL;
	case 5:
		return -ENOENT;
	case 6:
		return -EEXIST;
	case 7:
	case 16:
		return -EACCES;
	case 9:
		return -EBUSY;
	case 14:
		return -EAGAIN;
	case 4:
		return -ETIMEDOUT;
	case 8:
		return -ENOSPC;
	case 2:
		if (strstr(msg, "deadline exceeded"))
			return -ETIMEDOUT;
		if (strstr(msg, "not enough started members"))
			return -EBUSY;
		return -EIO;
	default:
		return -EIO;
	}
}

int etcd_parse_error(long http_status, const char *body, size_t len, struct etcd_error *err)
{
	cJSON *j = NULL;
	long long code = 0;
	const char *msg = NULL;
	char what[160];
	int r;

	if (json_parse(body, len, &j, NULL) == 0 && cJSON_IsObject(j)) {
		/* unary: {"error","message","code"}; in a stream: {"error":{"grpc_code",...}} */
		const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");

		if (cJSON_IsObject(e)) {
			json_get_int(e, "grpc_code", &code);
			msg = json_str(e, "message");
		} else {
			json_get_int(j, "code", &code);
			msg = json_str(j, "message");
			if (!msg)
				msg = json_str(j, "error");
		}
	}
	if (!msg) {
		str_printf(what, sizeof(what), "HTTP %ld: %.*s", http_status,
			   (int)(len > 100 ? 100 : len), body ? body : "");
		msg = what;
	}
	if (code <= 0 || code > 16)
		code = 0;
	err_set(err, (int)code, http_status, msg);
	r = code ? etcd_code_errno((int)code, msg) : -EIO;
	if (!code && http_status == 404)
		r = -ENOENT;
	cJSON_Delete(j);
	return r;
}

/* ---- transport ---- */

static bool reachability_error(int r)
{
	return r == -ECONNREFUSED || r == -EHOSTUNREACH || r == -ECONNRESET || r == -EPROTO;
}

static int post_one(struct etcd_client *c, const char *endpoint, const char *path,
		    const char *body, struct http_response *resp, struct etcd_error *err)
{
	_cleanup_buf_ struct buf url = BUF_INIT(0);
	const struct http_header h[] = { { "Content-Type", "application/json" } };
	int r = http_url_join(endpoint, path, &url);

	if (r < 0)
		return r;
	http_response_release(resp);
	http_response_init(resp);
	atomic_fetch_add(&c->calls, 1);
	r = http_client_do(c->http,
			   &(struct http_request){ .method = "POST", .url = url.data, .headers = h,
						   .n_headers = 1, .body = body,
						   .body_len = strlen(body) },
			   resp);
	log_v(6, "etcd call", KV_S("url", url.data), KV_I("status", resp->status), KV_E(r));
	if (r < 0) {
		err_set(err, 0, 0, resp->error[0] ? resp->error : strerror(-r));
		return r;
	}
	if (resp->status / 100 != 2)
		return etcd_parse_error(resp->status, resp->body.data, resp->body.len, err);
	return 0;
}

/* POSTs body to path on endpoint, or (endpoint NULL) on the endpoints in turn, from the last one
 * that answered; a call safe to repeat (idempotent) also moves on after a timeout or an
 * Unavailable answer (a learner, a member without quorum). On success the reply is parsed into
 * *ret_json. */
int etcd_call(struct etcd_client *c, const char *endpoint, const char *path, const char *body,
	      bool idempotent, cJSON **ret_json, struct etcd_error *err)
{
	struct http_response resp;
	struct etcd_error scratch;
	size_t start = atomic_load(&c->preferred), n = endpoint ? 1 : c->n;
	int r = -EINVAL;

	if (!err)
		err = &scratch;
	err_set(err, 0, 0, NULL);
	http_response_init(&resp);
	for (size_t k = 0; k < n; k++) {
		size_t i = (start + k) % c->n;

		r = post_one(c, endpoint ? endpoint : c->endpoints[i], path, body, &resp, err);
		if (r >= 0) {
			if (!endpoint)
				atomic_store(&c->preferred, i);
			break;
		}
		if (!reachability_error(r) && !(idempotent && (r == -ETIMEDOUT || r == -EAGAIN)))
			break;
	}
	if (r >= 0 && ret_json) {
		size_t off = 0;

		if (json_parse(resp.body.data, resp.body.len, ret_json, &off) < 0 ||
		    !cJSON_IsObject(*ret_json)) {
			cJSON_Delete(*ret_json);
			*ret_json = NULL;
			err_set(err, 0, resp.status, "the reply is not a JSON object");
			r = -EBADMSG;
		}
	}
	http_response_release(&resp);
	return r;
}

size_t etcd_client_preferred(struct etcd_client *c)
{
	return atomic_load(&c->preferred) % c->n;
}

bool etcd_reachability_error(int r)
{
	return reachability_error(r);
}

struct http_client *etcd_client_http(struct etcd_client *c)
{
	return c->http;
}

int64_t etcd_client_timeout(const struct etcd_client *c)
{
	return c->timeout_ns;
}

void etcd_count_call(struct etcd_client *c)
{
	atomic_fetch_add(&c->calls, 1);
}

/* ---- values ---- */

/* A uint64 as the gateway writes it: a string of digits, or a number; missing is 0. */
int etcd_json_u64(const cJSON *obj, const char *key, uint64_t *ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
	char *end;

	*ret = 0;
	if (!v || cJSON_IsNull(v))
		return 0;
	if (cJSON_IsNumber(v)) {
		if (v->valuedouble < 0 || v->valuedouble > 9007199254740992.0)
			return -EBADMSG;
		*ret = (uint64_t)v->valuedouble;
		return 0;
	}
	if (!cJSON_IsString(v) || !v->valuestring[0] || v->valuestring[0] == '-')
		return -EBADMSG;
	errno = 0;
	*ret = strtoull(v->valuestring, &end, 10);
	if (errno || *end)
		return -EBADMSG;
	return 0;
}

static int json_i64(const cJSON *obj, const char *key, int64_t *ret)
{
	uint64_t u;
	int r = etcd_json_u64(obj, key, &u);

	if (r < 0 || u > INT64_MAX)
		return r < 0 ? r : -EBADMSG;
	*ret = (int64_t)u;
	return 0;
}

static int strv_from_json(const cJSON *arr, char ***ret)
{
	const cJSON *e;
	char **v = calloc(1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	if (arr && !cJSON_IsArray(arr)) {
		free(v);
		return -EBADMSG;
	}
	cJSON_ArrayForEach(e, arr) {
		int r = cJSON_IsString(e) ? strv_push(&v, e->valuestring) : -EBADMSG;

		if (r < 0) {
			strv_free(v);
			return r;
		}
	}
	*ret = v;
	return 0;
}

void etcd_member_release(struct etcd_member *m)
{
	if (!m)
		return;
	free(m->name);
	strv_free(m->peer_urls);
	strv_free(m->client_urls);
	memset(m, 0, sizeof(*m));
}

void etcd_members_release(struct etcd_members *ms)
{
	if (!ms)
		return;
	for (size_t i = 0; i < ms->n; i++)
		etcd_member_release(&ms->v[i]);
	free(ms->v);
	memset(ms, 0, sizeof(*ms));
}

static int parse_member(const cJSON *o, struct etcd_member *m)
{
	const char *name = json_str(o, "name");
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(o, "isLearner");
	int r;

	memset(m, 0, sizeof(*m));
	if (!cJSON_IsObject(o))
		return -EBADMSG;
	if ((r = etcd_json_u64(o, "ID", &m->id)) < 0 || !m->id)
		return -EBADMSG;
	if (l && !cJSON_IsBool(l))
		return -EBADMSG;
	m->is_learner = cJSON_IsTrue(l);
	if (!(m->name = strdup(name ? name : "")))
		return -ENOMEM;
	if ((r = strv_from_json(cJSON_GetObjectItemCaseSensitive(o, "peerURLs"), &m->peer_urls)) < 0 ||
	    (r = strv_from_json(cJSON_GetObjectItemCaseSensitive(o, "clientURLs"), &m->client_urls)) < 0) {
		etcd_member_release(m);
		return r;
	}
	return 0;
}

static int members_from_json(const cJSON *j, struct etcd_members *ret)
{
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "members"), *e;
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "header");
	struct etcd_members ms = { 0 };
	int r = 0;

	if (!cJSON_IsArray(arr) || !cJSON_IsObject(h))
		return -EBADMSG;
	if (etcd_json_u64(h, "cluster_id", &ms.cluster_id) < 0 ||
	    etcd_json_u64(h, "member_id", &ms.member_id) < 0)
		return -EBADMSG;
	ms.v = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof(*ms.v));
	if (!ms.v)
		return -ENOMEM;
	cJSON_ArrayForEach(e, arr) {
		if ((r = parse_member(e, &ms.v[ms.n])) < 0)
			break;
		ms.n++;
	}
	if (r < 0) {
		etcd_members_release(&ms);
		return r;
	}
	*ret = ms;
	return 0;
}

int etcd_parse_members(const char *json, size_t len, struct etcd_members *ret)
{
	cJSON *j;
	int r = json_parse(json, len, &j, NULL);

	if (r < 0)
		return r;
	r = members_from_json(j, ret);
	cJSON_Delete(j);
	return r;
}

static int status_from_json(const cJSON *j, struct etcd_status *ret)
{
	struct etcd_status s = { 0 };
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "header"), *e;
	const char *v = json_str(j, "version");
	struct buf errs = BUF_INIT(sizeof(s.errors) - 1);

	if (!cJSON_IsObject(h) || !v || etcd_json_u64(h, "member_id", &s.member_id) < 0 ||
	    etcd_json_u64(j, "leader", &s.leader) < 0 || json_i64(j, "dbSize", &s.db_size) < 0 ||
	    json_i64(j, "dbSizeInUse", &s.db_size_in_use) < 0 ||
	    etcd_json_u64(j, "raftIndex", &s.raft_index) < 0 ||
	    etcd_json_u64(j, "raftTerm", &s.raft_term) < 0 ||
	    etcd_json_u64(j, "raftAppliedIndex", &s.raft_applied_index) < 0)
		return -EBADMSG;
	str_copy(s.version, sizeof(s.version), v);
	s.is_learner = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "isLearner"));
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "errors")) {
		if (cJSON_IsString(e))
			buf_printf(&errs, "%s%s", errs.len ? "; " : "", e->valuestring);
	}
	if (errs.len)
		str_copy(s.errors, sizeof(s.errors), errs.data);
	buf_release(&errs);
	*ret = s;
	return 0;
}

int etcd_parse_status(const char *json, size_t len, struct etcd_status *ret)
{
	cJSON *j;
	int r = json_parse(json, len, &j, NULL);

	if (r < 0)
		return r;
	r = status_from_json(j, ret);
	cJSON_Delete(j);
	return r;
}

const struct etcd_member *etcd_members_find_name(const struct etcd_members *ms, const char *name)
{
	for (size_t i = 0; name && name[0] && i < ms->n; i++)
		if (strcmp(ms->v[i].name, name) == 0)
			return &ms->v[i];
	return NULL;
}

const struct etcd_member *etcd_members_find_peer(const struct etcd_members *ms, const char *url)
{
	for (size_t i = 0; url && i < ms->n; i++)
		if (strv_contains(ms->v[i].peer_urls, url))
			return &ms->v[i];
	return NULL;
}

/* ---- calls ---- */

static char *body_print(cJSON *b)
{
	char *s = b ? json_print(b) : NULL;

	cJSON_Delete(b);
	return s;
}

static cJSON *id_body(uint64_t id)
{
	char s[24];
	cJSON *b = cJSON_CreateObject();

	str_printf(s, sizeof(s), "%llu", (unsigned long long)id);
	if (b && !cJSON_AddStringToObject(b, "ID", s)) {
		cJSON_Delete(b);
		return NULL;
	}
	return b;
}

static int add_urls(cJSON *b, char *const *urls)
{
	cJSON *a;

	if (!b || !urls || !urls[0] || !(a = cJSON_AddArrayToObject(b, "peerURLs")))
		return -EINVAL;
	for (size_t i = 0; urls[i]; i++) {
		cJSON *s = cJSON_CreateString(urls[i]);

		if (!s || !cJSON_AddItemToArray(a, s)) {
			cJSON_Delete(s);
			return -ENOMEM;
		}
	}
	return 0;
}

static int call_body(struct etcd_client *c, const char *endpoint, const char *path, cJSON *b,
		     bool idempotent, cJSON **ret, struct etcd_error *err)
{
	_cleanup_free_ char *body = body_print(b);

	if (!body)
		return -ENOMEM;
	return etcd_call(c, endpoint, path, body, idempotent, ret, err);
}

static int bad_reply(struct etcd_error *err, const char *what)
{
	err_set(err, 0, 200, what);
	return -EBADMSG;
}

int etcd_member_list(struct etcd_client *c, struct etcd_members *ret, struct etcd_error *err)
{
	cJSON *j = NULL;
	int r = etcd_call(c, NULL, "/v3/cluster/member/list", "{}", true, &j, err);

	if (r >= 0 && (r = members_from_json(j, ret)) < 0)
		bad_reply(err, "the member list is not what etcd sends");
	cJSON_Delete(j);
	return r;
}

int etcd_member_add(struct etcd_client *c, char *const *peer_urls, bool learner,
		    struct etcd_member *ret_added, struct etcd_members *ret_list,
		    struct etcd_error *err)
{
	cJSON *b = cJSON_CreateObject(), *j = NULL;
	struct etcd_member m = { 0 };
	struct etcd_members ms = { 0 };
	int r = add_urls(b, peer_urls);

	if (r < 0 || (learner && !cJSON_AddTrueToObject(b, "isLearner"))) {
		cJSON_Delete(b);
		return r < 0 ? r : -ENOMEM;
	}
	r = call_body(c, NULL, "/v3/cluster/member/add", b, false, &j, err);
	if (r >= 0 && ((r = parse_member(cJSON_GetObjectItemCaseSensitive(j, "member"), &m)) < 0 ||
		       (r = members_from_json(j, &ms)) < 0))
		bad_reply(err, "the MemberAdd reply is not what etcd sends");
	cJSON_Delete(j);
	if (r >= 0 && ret_added)
		*ret_added = m;
	else
		etcd_member_release(&m);
	if (r >= 0 && ret_list)
		*ret_list = ms;
	else
		etcd_members_release(&ms);
	return r;
}

static int id_call(struct etcd_client *c, const char *path, uint64_t id, bool idem,
		   struct etcd_error *err)
{
	cJSON *j = NULL;
	int r = call_body(c, NULL, path, id_body(id), idem, &j, err);

	cJSON_Delete(j);
	return r;
}

int etcd_member_remove(struct etcd_client *c, uint64_t id, struct etcd_error *err)
{
	return id_call(c, "/v3/cluster/member/remove", id, false, err);
}

int etcd_member_promote(struct etcd_client *c, uint64_t id, struct etcd_error *err)
{
	return id_call(c, "/v3/cluster/member/promote", id, false, err);
}

int etcd_member_update(struct etcd_client *c, uint64_t id, char *const *peer_urls,
		       struct etcd_error *err)
{
	cJSON *b = id_body(id), *j = NULL;
	int r = add_urls(b, peer_urls);

	if (r < 0) {
		cJSON_Delete(b);
		return r;
	}
	r = call_body(c, NULL, "/v3/cluster/member/update", b, true, &j, err);
	cJSON_Delete(j);
	return r;
}

int etcd_status(struct etcd_client *c, const char *endpoint, struct etcd_status *ret,
		struct etcd_error *err)
{
	cJSON *j = NULL;
	int r = etcd_call(c, endpoint, "/v3/maintenance/status", "{}", true, &j, err);

	if (r >= 0 && (r = status_from_json(j, ret)) < 0)
		bad_reply(err, "the status is not what etcd sends");
	cJSON_Delete(j);
	return r;
}

int etcd_defragment(struct etcd_client *c, const char *endpoint, struct etcd_error *err)
{
	cJSON *j = NULL;
	int r = etcd_call(c, endpoint, "/v3/maintenance/defragment", "{}", false, &j, err);

	cJSON_Delete(j);
	return r;
}

static int add_b64(cJSON *b, const char *key, const void *data, size_t len)
{
	_cleanup_free_ char *s = NULL;
	int r = base64_encode(data, len, BASE64_STD, &s);

	if (r < 0)
		return r;
	return cJSON_AddStringToObject(b, key, s) ? 0 : -ENOMEM;
}

int etcd_put(struct etcd_client *c, const void *key, size_t klen, const void *val, size_t vlen,
	     int64_t *ret_revision, struct etcd_error *err)
{
	cJSON *b = cJSON_CreateObject(), *j = NULL;
	int64_t rev = 0;
	int r;

	if (!b || !klen)
		r = b ? -EINVAL : -ENOMEM;
	else if ((r = add_b64(b, "key", key, klen)) >= 0)
		r = add_b64(b, "value", val, vlen);
	if (r < 0) {
		cJSON_Delete(b);
		return r;
	}
	r = call_body(c, NULL, "/v3/kv/put", b, false, &j, err);
	if (r >= 0 && json_i64(cJSON_GetObjectItemCaseSensitive(j, "header"), "revision", &rev) < 0)
		r = bad_reply(err, "the put reply has no revision");
	if (r >= 0 && ret_revision)
		*ret_revision = rev;
	cJSON_Delete(j);
	return r;
}

int etcd_get(struct etcd_client *c, const void *key, size_t klen, bool serializable,
	     struct buf *val, bool *ret_found, int64_t *ret_revision, struct etcd_error *err)
{
	cJSON *b = cJSON_CreateObject(), *j = NULL;
	const cJSON *kvs, *kv;
	const char *v64;
	void *raw = NULL;
	size_t n = 0;
	int64_t rev = 0;
	int r;

	if (!b || !klen)
		r = b ? -EINVAL : -ENOMEM;
	else if ((r = add_b64(b, "key", key, klen)) >= 0 && serializable &&
		 !cJSON_AddTrueToObject(b, "serializable"))
		r = -ENOMEM;
	if (r < 0) {
		cJSON_Delete(b);
		return r;
	}
	r = call_body(c, NULL, "/v3/kv/range", b, true, &j, err);
	if (r < 0)
		return r;
	kvs = cJSON_GetObjectItemCaseSensitive(j, "kvs");
	kv = cJSON_GetArrayItem(kvs, 0);
	json_i64(cJSON_GetObjectItemCaseSensitive(j, "header"), "revision", &rev);
	if (kvs && !cJSON_IsArray(kvs)) {
		r = bad_reply(err, "kvs is not an array");
	} else if (kv) {
		v64 = json_str(kv, "value");
		if (base64_decode(v64 ? v64 : "", v64 ? strlen(v64) : 0, BASE64_STD, &raw, &n) < 0)
			r = bad_reply(err, "a value is not base64");
		else if (val) {
			buf_reset(val);
			r = buf_append(val, raw, n);
		}
		free(raw);
	}
	if (r >= 0) {
		*ret_found = kv != NULL;
		if (ret_revision)
			*ret_revision = rev;
	}
	cJSON_Delete(j);
	return r;
}
