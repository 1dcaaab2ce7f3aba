/* etcd's streaming snapshot over the gateway (etcd.h): one JSON object a line,
 * {"result":{"remaining_bytes":"N","blob":"<base64>"}}, 32 KiB of db a message; the first
 * message's remaining_bytes plus its blob's length is the db's size; after the db, one message
 * carries the db's sha256 as its blob. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/base64.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/etcd/etcd.h"
#include "common/etcd/internal.h"
#include "common/http/client.h"

#define SNAP_MAX_LINE ((size_t)1 << 20)

static int snap_fail(struct etcd_snap_parser *p, const char *what)
{
	if (p->err) {
		p->err->code = 0;
		str_copy(p->err->message, sizeof(p->err->message), what);
	}
	return -EBADMSG;
}

int etcd_snap_parser_init(struct etcd_snap_parser *p, int (*write)(void *, const void *, size_t),
			  void *ud, struct etcd_error *err)
{
	memset(p, 0, sizeof(*p));
	p->write = write;
	p->ud = ud;
	p->err = err;
	p->sha = EVP_MD_CTX_new();
	if (!p->sha || EVP_DigestInit_ex(p->sha, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(p->sha);
		p->sha = NULL;
		return -ENOMEM;
	}
	return 0;
}

void etcd_snap_parser_release(struct etcd_snap_parser *p)
{
	EVP_MD_CTX_free(p->sha);
	p->sha = NULL;
}

int etcd_snap_parser_feed(struct etcd_snap_parser *p, const char *line, size_t len)
{
	cJSON *j = NULL;
	const cJSON *res;
	const char *b64;
	void *blob = NULL;
	size_t n = 0;
	uint64_t remaining = 0;
	int r;

	while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
		len--;
	if (!len)
		return 0;
	if (json_parse(line, len, &j, NULL) < 0 || !cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return snap_fail(p, "a snapshot message is not JSON");
	}
	if (cJSON_GetObjectItemCaseSensitive(j, "error")) {
		r = etcd_parse_error(200, line, len, p->err);
		cJSON_Delete(j);
		return r;
	}
	res = cJSON_GetObjectItemCaseSensitive(j, "result");
	b64 = json_str(res, "blob");
	if (!cJSON_IsObject(res) || etcd_json_u64(res, "remaining_bytes", &remaining) < 0) {
		cJSON_Delete(j);
		return snap_fail(p, "a snapshot message has no result");
	}
	if (!b64)
		b64 = "";
	r = base64_decode(b64, strlen(b64), BASE64_STD, &blob, &n);
	cJSON_Delete(j);
	if (r < 0)
		return snap_fail(p, "a snapshot blob is not base64");
	p->messages++;
	if (p->done) {
		r = snap_fail(p, "a snapshot message after the hash");
	} else if (!p->have_total) {
		p->have_total = true;
		p->total = remaining + n;
	}
	if (r >= 0 && p->got < p->total) {
		/* a piece of the db: remaining_bytes must count down to what is left */
		if (n == 0 || n > p->total - p->got || remaining != p->total - p->got - n)
			r = snap_fail(p, "a snapshot message does not continue the db");
		else if (EVP_DigestUpdate(p->sha, blob, n) != 1)
			r = -ENOMEM;
		else
			p->got += n;
	} else if (r >= 0) {
		/* the db is complete: this is its sha256 */
		unsigned char md[32];
		unsigned mdlen = 0;

		if (n != sizeof(md) || remaining != 0)
			r = snap_fail(p, "the snapshot is longer than announced");
		else if (EVP_DigestFinal_ex(p->sha, md, &mdlen) != 1 || mdlen != sizeof(md))
			r = -ENOMEM;
		else if (memcmp(md, blob, sizeof(md)) != 0)
			r = snap_fail(p, "the snapshot's sha256 does not match its data");
		else {
			memcpy(p->sha256, md, sizeof(md));
			p->done = true;
		}
	}
	if (r >= 0 && p->write)
		r = p->write(p->ud, blob, n);
	free(blob);
	return r;
}

int etcd_snap_parser_finish(struct etcd_snap_parser *p)
{
	if (!p->have_total)
		return snap_fail(p, "the snapshot stream ended before any data");
	if (!p->done)
		return snap_fail(p, p->got < p->total ? "the snapshot stream ended before the db did"
						      : "the snapshot stream ended without its hash");
	return 0;
}

static int on_line(void *ud, const char *line, size_t len)
{
	return etcd_snap_parser_feed(ud, line, len);
}

static int snapshot_one(struct etcd_client *c, const char *endpoint, int64_t total_timeout_ns,
			struct etcd_snap_parser *p, struct etcd_error *err)
{
	struct http_response resp;
	_cleanup_buf_ struct buf url = BUF_INIT(0);
	const struct http_header h[] = { { "Content-Type", "application/json" } };
	int r;

	if ((r = http_url_join(endpoint, "/v3/maintenance/snapshot", &url)) < 0)
		return r;
	http_response_init(&resp);
	etcd_count_call(c);
	r = http_client_stream(etcd_client_http(c),
			       &(struct http_request){ .method = "POST", .url = url.data,
						       .headers = h, .n_headers = 1, .body = "{}",
						       .body_len = 2,
						       .timeout_ns = total_timeout_ns },
			       &(struct http_stream_opts){ .max_line = SNAP_MAX_LINE,
							   .idle_timeout_ns = etcd_client_timeout(c),
							   .on_line = on_line,
							   .ud = p },
			       &resp);
	if (r < 0 && !err->message[0]) {
		err->http_status = resp.status;
		str_copy(err->message, sizeof(err->message),
			 resp.error[0] ? resp.error : strerror(-r));
	}
	if (r >= 0 && resp.status / 100 != 2)
		r = etcd_parse_error(resp.status, resp.body.data, resp.body.len, err);
	else if (r >= 0)
		r = etcd_snap_parser_finish(p);
	log_v(5, "etcd snapshot", KV_S("url", url.data), KV_U("bytes", p->got), KV_E(r));
	http_response_release(&resp);
	return r;
}

int etcd_snapshot(struct etcd_client *c, const char *endpoint, int64_t total_timeout_ns,
		  int (*write)(void *ud, const void *data, size_t len), void *ud,
		  struct etcd_snapshot_info *ret, struct etcd_error *err)
{
	struct etcd_error scratch;
	struct etcd_snap_parser p;
	char *const *eps = etcd_client_endpoints(c);
	size_t n = endpoint ? 1 : strv_len(eps), start = etcd_client_preferred(c);
	int r = -EINVAL;

	if (!err)
		err = &scratch;
	for (size_t k = 0; k < n; k++) {
		memset(err, 0, sizeof(*err));
		if ((r = etcd_snap_parser_init(&p, write, ud, err)) < 0)
			return r;
		r = snapshot_one(c, endpoint ? endpoint : eps[(start + k) % n], total_timeout_ns, &p,
				 err);
		if (r >= 0 && ret) {
			ret->db_size = p.total;
			ret->messages = p.messages;
			memcpy(ret->sha256, p.sha256, sizeof(ret->sha256));
		}
		etcd_snap_parser_release(&p);
		/* another endpoint only when this one could not be reached: nothing written yet */
		if (r >= 0 || p.messages || !etcd_reachability_error(r))
			break;
	}
	return r;
}
