/* common/etcd: replies recorded from etcd 3.4.23's JSON gateway (tests/data/etcd/) parsed, the
 * error codes mapped, the calls made through a canned peer (tests/unit/peer.h), a peer that
 * never answers timed out, endpoints failed over, and the snapshot stream checked (the recorded
 * one, and built ones: several chunks, a flipped byte, cut short, a piece too many). */
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/base64.h"
#include "common/base/buf.h"
#include "common/base/timeutil.h"
#include "common/etcd/etcd.h"
#include "tests/unit/harness.h"
#include "tests/unit/peer.h"

static char *data_file(const char *name, size_t *len)
{
	return test_read_file(test_data(name), len);
}

/* An HTTP reply around a recorded body (static storage: the peer keeps the pointer). */
static const char *http_reply(int status, const char *body)
{
	static char buf[8][4096];
	static int next;
	char *b = buf[next++ % 8];

	snprintf(b, sizeof(buf[0]),
		 "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n%s",
		 status, strlen(body), body);
	return b;
}

static struct etcd_client *client_for(const char *url, int64_t timeout_ms)
{
	char *eps[] = { (char *)url, NULL };
	struct etcd_client *c = NULL;

	if (etcd_client_new(&(struct etcd_client_opts){ .endpoints = eps,
							.timeout_ns = timeout_ms * NSEC_PER_MSEC },
			    &c) < 0)
		return NULL;
	return c;
}

static void peer_url(const struct peer *p, char *buf, size_t n)
{
	snprintf(buf, n, "http://127.0.0.1:%d", p->port);
}

TEST(etcd_parse_member_list)
{
	size_t len;
	char *s = data_file("etcd/member-list-learner.json", &len);
	struct etcd_members ms = { 0 };

	ASSERT_TRUE(s != NULL);
	ASSERT_OK(etcd_parse_members(s, len, &ms));
	free(s);
	ASSERT_EQ(ms.n, 2);
	ASSERT_TRUE(ms.cluster_id == 15118495548433857066ULL);
	const struct etcd_member *e1 = etcd_members_find_name(&ms, "e1");
	ASSERT_TRUE(e1 != NULL);
	ASSERT_TRUE(e1->id == 13668033151171901709ULL);
	ASSERT_FALSE(e1->is_learner);
	ASSERT_STREQ(e1->client_urls[0], "http://127.0.0.1:23791");
	const struct etcd_member *l = etcd_members_find_peer(&ms, "http://127.0.0.1:23802");
	ASSERT_TRUE(l != NULL);
	ASSERT_TRUE(l->is_learner);
	ASSERT_STREQ(l->name, "");		/* not started: no name, no client URLs */
	ASSERT_TRUE(l->client_urls[0] == NULL);
	ASSERT_TRUE(etcd_members_find_name(&ms, "") == NULL);
	etcd_members_release(&ms);
}

TEST(etcd_parse_bad_replies)
{
	static const char *bad[] = {
		"{\"header\":{},\"members\":[{\"name\":\"x\"}]}",	  /* no ID */
		"{\"header\":{},\"members\":[{\"ID\":\"-1\"}]}",	  /* negative */
		"{\"header\":{},\"members\":[{\"ID\":\"12x\"}]}",	  /* not a number */
		"{\"header\":{},\"members\":[{\"ID\":\"1\",\"peerURLs\":[3]}]}",
		"{\"header\":{},\"members\":[{\"ID\":\"1\",\"isLearner\":\"yes\"}]}",
		"{\"header\":{},\"members\":{}}",
		"{\"members\":[]}", /* no header */
		"[]",
	};
	struct etcd_members ms = { 0 };

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ASSERT_ERR(etcd_parse_members(bad[i], strlen(bad[i]), &ms), EBADMSG);
	/* numbers are taken as well as strings */
	const char *num = "{\"header\":{\"cluster_id\":7},\"members\":[{\"ID\":5,\"name\":\"a\"}]}";
	ASSERT_OK(etcd_parse_members(num, strlen(num), &ms));
	ASSERT_EQ(ms.v[0].id, 5);
	ASSERT_EQ(ms.cluster_id, 7);
	etcd_members_release(&ms);
}

TEST(etcd_parse_status_no_leader)
{
	size_t len;
	char *s = data_file("etcd/status.json", &len);
	struct etcd_status st;

	ASSERT_TRUE(s != NULL);
	ASSERT_OK(etcd_parse_status(s, len, &st));
	free(s);
	ASSERT_STREQ(st.version, "3.4.23");
	ASSERT_EQ(st.db_size, 20480);
	ASSERT_EQ(st.db_size_in_use, 16384);
	ASSERT_EQ(st.leader, 0); /* left out: no leader */
	ASSERT_EQ(st.raft_index, 11);
	ASSERT_STREQ(st.errors, "etcdserver: no leader");
}

TEST(etcd_parse_errors)
{
	static const struct {
		const char *file;
		long status;
		int code, err;
		const char *msg;
	} cases[] = {
		{ "etcd/add-too-many-learners.json", 412, 9, -EBUSY, "too many learner" },
		{ "etcd/promote-not-started.json", 412, 9, -EBUSY, "in sync with leader" },
		{ "etcd/add-peer-exists.json", 412, 9, -EBUSY, "Peer URLs already exists" },
		{ "etcd/remove-not-found.json", 404, 5, -ENOENT, "member not found" },
		{ "etcd/put-timed-out.json", 500, 2, -ETIMEDOUT, "context deadline exceeded" },
		{ "etcd/range-request-timed-out.json", 503, 14, -EAGAIN, "request timed out" },
	};
	struct etcd_error e;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t len;
		char *s = data_file(cases[i].file, &len);

		ASSERT_TRUE(s != NULL);
		ASSERT_EQ(etcd_parse_error(cases[i].status, s, len, &e), cases[i].err);
		free(s);
		ASSERT_EQ(e.code, cases[i].code);
		ASSERT_EQ(e.http_status, cases[i].status);
		ASSERT_CONTAINS(e.message, cases[i].msg);
	}
	/* not JSON: the status and the start of the body */
	ASSERT_ERR(etcd_parse_error(405, "Method Not Allowed", 18, &e), EIO);
	ASSERT_CONTAINS(e.message, "HTTP 405: Method Not Allowed");
	ASSERT_ERR(etcd_parse_error(404, "404 page not found", 18, &e), ENOENT);
	/* a stream's error object */
	const char *st = "{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"etcdserver: "
			 "leader changed\",\"http_status\":\"Service Unavailable\"}}";
	ASSERT_ERR(etcd_parse_error(200, st, strlen(st), &e), EAGAIN);
	ASSERT_STREQ(e.message, "etcdserver: leader changed");
	/* "not enough started members" is a refusal to retry later */
	const char *ne = "{\"error\":\"etcdserver: re-configuration failed due to not enough "
			 "started members\",\"code\":2}";
	ASSERT_ERR(etcd_parse_error(500, ne, strlen(ne), &e), EBUSY);
}

TEST(etcd_calls_through_a_peer)
{
	char *add = data_file("etcd/add-learner.json", NULL);
	char *range = data_file("etcd/range-one.json", NULL);
	char *learners = data_file("etcd/add-too-many-learners.json", NULL);
	struct peer *p = peer_start(NULL);
	struct etcd_member m = { 0 };
	struct etcd_members ms = { 0 };
	struct etcd_error e;
	char url[64], u0[] = "http://127.0.0.1:23802", *urls[] = { u0, NULL };
	struct buf v = BUF_INIT(0);
	bool found = false;
	int64_t rev = 0;

	ASSERT_TRUE(p && add && range && learners);
	peer_url(p, url, sizeof(url));
	struct etcd_client *c = client_for(url, 3000);
	ASSERT_TRUE(c != NULL);

	atomic_store(&p->reply, http_reply(200, add));
	ASSERT_OK(etcd_member_add(c, urls, true, &m, &ms, &e));
	ASSERT_TRUE(m.is_learner);
	ASSERT_TRUE(m.id == 15742897757494941531ULL);
	ASSERT_EQ(ms.n, 2);
	etcd_member_release(&m);
	etcd_members_release(&ms);

	atomic_store(&p->reply, http_reply(412, learners));
	ASSERT_ERR(etcd_member_add(c, urls, true, NULL, NULL, &e), EBUSY);
	ASSERT_EQ(e.code, 9);
	ASSERT_EQ(e.http_status, 412);

	atomic_store(&p->reply, http_reply(200, range));
	ASSERT_OK(etcd_get(c, "foo", 3, true, &v, &found, &rev, &e));
	ASSERT_TRUE(found);
	ASSERT_STREQ(v.data, "bar");
	ASSERT_EQ(rev, 2);

	atomic_store(&p->reply, http_reply(200, "{\"header\":{\"revision\":\"9\"}}"));
	ASSERT_OK(etcd_get(c, "nope", 4, false, &v, &found, &rev, &e));
	ASSERT_FALSE(found);
	ASSERT_OK(etcd_put(c, "k", 1, "v", 1, &rev, &e));
	ASSERT_EQ(rev, 9);

	atomic_store(&p->reply, http_reply(200, "{\"header\":{}, \"members\": 3}"));
	ASSERT_ERR(etcd_member_list(c, &ms, &e), EBADMSG);
	atomic_store(&p->reply, http_reply(200, "not json"));
	ASSERT_ERR(etcd_member_list(c, &ms, &e), EBADMSG);
	ASSERT_EQ(etcd_client_calls(c), 7);
	etcd_client_free(c);
	peer_stop(p);
	buf_release(&v);
	free(add);
	free(range);
	free(learners);
}

TEST(etcd_hanging_peer_times_out)
{
	struct peer *p = peer_start(NULL); /* accepts, never answers */
	struct etcd_error e;
	struct etcd_members ms;
	char url[64];

	ASSERT_TRUE(p != NULL);
	peer_url(p, url, sizeof(url));
	struct etcd_client *c = client_for(url, 300);
	ASSERT_TRUE(c != NULL);
	int64_t t0 = now_mono_ns();
	ASSERT_ERR(etcd_member_remove(c, 42, &e), ETIMEDOUT);
	ASSERT_LT(elapsed_ms(t0), 5000);
	ASSERT_GE(elapsed_ms(t0), 250);
	t0 = now_mono_ns();
	ASSERT_ERR(etcd_member_list(c, &ms, &e), ETIMEDOUT);
	ASSERT_LT(elapsed_ms(t0), 5000);
	etcd_client_free(c);
	peer_stop(p);
}

TEST(etcd_fails_over_to_the_next_endpoint)
{
	char *list = data_file("etcd/member-list-learner.json", NULL);
	struct peer *p = peer_start(NULL), *dead = peer_start(NULL);
	struct etcd_members ms = { 0 };
	struct etcd_client *c = NULL;
	struct etcd_error e;
	char good[64], gone[64];

	ASSERT_TRUE(p && dead && list);
	peer_url(p, good, sizeof(good));
	peer_url(dead, gone, sizeof(gone));
	peer_stop(dead); /* its port now refuses */
	atomic_store(&p->reply, http_reply(200, list));
	char *eps[] = { gone, good, NULL };
	ASSERT_OK(etcd_client_new(&(struct etcd_client_opts){ .endpoints = eps }, &c));
	ASSERT_OK(etcd_member_list(c, &ms, &e));
	ASSERT_EQ(ms.n, 2);
	ASSERT_EQ(etcd_client_calls(c), 2);
	etcd_members_release(&ms);
	/* the one that answered is tried first from then on */
	ASSERT_OK(etcd_member_list(c, &ms, &e));
	ASSERT_EQ(etcd_client_calls(c), 3);
	etcd_members_release(&ms);
	etcd_client_free(c);
	peer_stop(p);
	free(list);
	char b0[] = "127.0.0.1:2379", *bad[] = { b0, NULL };
	ASSERT_ERR(etcd_client_new(&(struct etcd_client_opts){ .endpoints = bad }, &c), EINVAL);
}

/* ---- snapshot ---- */

static int collect(void *ud, const void *data, size_t len)
{
	return buf_append(ud, data, len);
}

static int feed_lines(struct etcd_snap_parser *p, char *text)
{
	char *save = NULL;
	int r = 0;

	for (char *l = strtok_r(text, "\n", &save); l && r >= 0; l = strtok_r(NULL, "\n", &save))
		r = etcd_snap_parser_feed(p, l, strlen(l));
	return r < 0 ? r : etcd_snap_parser_finish(p);
}

TEST(etcd_snapshot_recorded_stream)
{
	char *s = data_file("etcd/snapshot-small.jsonl", NULL);
	struct buf out = BUF_INIT(0);
	struct etcd_snap_parser p;
	struct etcd_error e = { 0 };
	unsigned char md[32];

	ASSERT_TRUE(s != NULL);
	ASSERT_OK(etcd_snap_parser_init(&p, collect, &out, &e));
	ASSERT_OK(feed_lines(&p, s));
	ASSERT_EQ(p.total, 20480);
	ASSERT_EQ(p.messages, 2);
	ASSERT_EQ(out.len, 20480 + 32); /* as etcdctl snapshot save writes it */
	SHA256((const unsigned char *)out.data, 20480, md);
	ASSERT_TRUE(memcmp(md, out.data + 20480, 32) == 0);
	etcd_snap_parser_release(&p);
	free(s);

	/* one base64 character of the db changed: the hash does not match */
	s = data_file("etcd/snapshot-small.jsonl", NULL);
	char *blob = strstr(s, "\"blob\":\"") + 8 + 200;
	*blob = *blob == 'A' ? 'B' : 'A';
	buf_reset(&out);
	ASSERT_OK(etcd_snap_parser_init(&p, collect, &out, &e));
	ASSERT_ERR(feed_lines(&p, s), EBADMSG);
	ASSERT_CONTAINS(e.message, "sha256 does not match");
	etcd_snap_parser_release(&p);
	free(s);

	/* cut after the db: no hash */
	s = data_file("etcd/snapshot-small.jsonl", NULL);
	*strchr(s, '\n') = 0;
	ASSERT_OK(etcd_snap_parser_init(&p, collect, &out, &e));
	ASSERT_ERR(feed_lines(&p, s), EBADMSG);
	ASSERT_CONTAINS(e.message, "without its hash");
	etcd_snap_parser_release(&p);
	free(s);
	buf_release(&out);
}

/* A stream of n chunks of size sz (the last one shorter by short_last), its hash line, then
 * `extra` lines. */
static char *make_stream(size_t n, size_t sz, size_t short_last, bool bad_hash, int extra)
{
	struct buf s = BUF_INIT(0);
	size_t total = n * sz - short_last, sent = 0;
	unsigned char *db = malloc(total), md[32];
	char *b64;

	for (size_t i = 0; i < total; i++)
		db[i] = (unsigned char)(i * 7 + 3);
	for (size_t i = 0; i < n; i++) {
		size_t k = i + 1 == n ? sz - short_last : sz;

		base64_encode(db + sent, k, BASE64_STD, &b64);
		sent += k;
		if (total - sent)
			buf_printf(&s, "{\"result\":{\"remaining_bytes\":\"%zu\",\"blob\":\"%s\"}}\n",
				   total - sent, b64);
		else
			buf_printf(&s, "{\"result\":{\"blob\":\"%s\"}}\n", b64);
		free(b64);
	}
	SHA256(db, total, md);
	md[0] ^= bad_hash;
	base64_encode(md, 32, BASE64_STD, &b64);
	buf_printf(&s, "{\"result\":{\"blob\":\"%s\"}}\n", b64);
	while (extra-- > 0)
		buf_printf(&s, "{\"result\":{\"blob\":\"%s\"}}\n", b64);
	free(b64);
	free(db);
	return buf_steal(&s);
}

TEST(etcd_snapshot_built_streams)
{
	struct buf out = BUF_INIT(0);
	struct etcd_snap_parser p;
	struct etcd_error e = { 0 };
	char *s;

	s = make_stream(5, 32768, 100, false, 0);
	ASSERT_OK(etcd_snap_parser_init(&p, collect, &out, &e));
	ASSERT_OK(feed_lines(&p, s));
	ASSERT_EQ(out.len, 5 * 32768 - 100 + 32);
	ASSERT_EQ(p.messages, 6);
	etcd_snap_parser_release(&p);
	free(s);

	s = make_stream(3, 1000, 0, true, 0);
	ASSERT_OK(etcd_snap_parser_init(&p, NULL, NULL, &e));
	ASSERT_ERR(feed_lines(&p, s), EBADMSG);
	etcd_snap_parser_release(&p);
	free(s);

	s = make_stream(3, 1000, 0, false, 1);
	ASSERT_OK(etcd_snap_parser_init(&p, NULL, NULL, &e));
	ASSERT_ERR(feed_lines(&p, s), EBADMSG);
	ASSERT_CONTAINS(e.message, "after the hash");
	etcd_snap_parser_release(&p);
	free(s);

	/* a chunk missing in the middle: remaining_bytes does not count down */
	s = make_stream(4, 1000, 0, false, 0);
	char *second = strchr(s, '\n') + 1, *third = strchr(second, '\n') + 1;
	memmove(second, third, strlen(third) + 1);
	ASSERT_OK(etcd_snap_parser_init(&p, NULL, NULL, &e));
	ASSERT_ERR(feed_lines(&p, s), EBADMSG);
	ASSERT_CONTAINS(e.message, "does not continue");
	etcd_snap_parser_release(&p);
	free(s);

	/* an error in the stream */
	char err_line[] = "{\"error\":{\"grpc_code\":14,\"message\":\"etcdserver: no leader\"}}";
	ASSERT_OK(etcd_snap_parser_init(&p, NULL, NULL, &e));
	ASSERT_ERR(feed_lines(&p, err_line), EAGAIN);
	etcd_snap_parser_release(&p);
	buf_release(&out);
}

TEST(etcd_snapshot_through_a_peer)
{
	char *s = data_file("etcd/snapshot-small.jsonl", NULL);
	struct buf reply = BUF_INIT(0), out = BUF_INIT(0);
	struct etcd_snapshot_info info;
	struct etcd_error e;
	struct peer *p = peer_start(NULL);
	char url[64];

	ASSERT_TRUE(s && p);
	buf_printf(&reply, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			   "Connection: close\r\n\r\n%s", s);
	atomic_store(&p->reply, reply.data);
	peer_url(p, url, sizeof(url));
	struct etcd_client *c = client_for(url, 2000);
	ASSERT_TRUE(c != NULL);
	ASSERT_OK(etcd_snapshot(c, NULL, 0, collect, &out, &info, &e));
	ASSERT_EQ(info.db_size, 20480);
	ASSERT_EQ(out.len, 20512);
	/* a reply cut in the middle of the db */
	reply.data[reply.len / 2] = 0;
	buf_reset(&out);
	ASSERT_ERR(etcd_snapshot(c, NULL, 0, collect, &out, &info, &e), EBADMSG);
	etcd_client_free(c);
	peer_stop(p);
	buf_release(&reply);
	buf_release(&out);
	free(s);
}
