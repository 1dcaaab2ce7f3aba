#include <curl/curl.h>
#include <stdlib.h>

#include "common/http/server.h"
#include "common/metrics/metrics.h"
#include "tests/unit/harness.h"

struct got {
	long status;
	struct buf body;
};

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
	struct got *g = ud;
	return buf_append(&g->body, p, sz * n) == 0 ? sz * n : 0;
}

/* A plain libcurl request, independent of the project's HTTP client. */
static int fetch(int port, const char *method, const char *path, const char *body, struct got *g)
{
	char url[256];
	CURL *c = curl_easy_init();
	if (!c)
		return -ENOMEM;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	buf_init(&g->body, 0);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, g);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	CURLcode rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &g->status);
	curl_easy_cleanup(c);
	return rc == CURLE_OK ? 0 : -EIO;
}

static int echo_handler(void *ud, const struct http_server_request *req, struct http_server_reply *rep)
{
	const char *q = http_request_query(req, "q");
	rep->status = 201;
	http_reply_header(rep, "X-Test", "yes");
	return buf_printf(&rep->body, "%s %s q=%s body=%.*s", req->method, req->path, q ? q : "-",
			  (int)req->body_len, req->body ? req->body : "");
}

static int fail_handler(void *ud, const struct http_server_request *req, struct http_server_reply *rep)
{
	return -EIO;
}

static bool ready_flag;
static int ready_check(void *ud, char *why, size_t n)
{
	if (ready_flag)
		return 0;
	snprintf(why, n, "informers not synced");
	return -EAGAIN;
}

TEST(http_server_handlers_and_standard_endpoints)
{
	struct http_server *s = NULL;
	struct got g;
	metrics_reset();
	ASSERT_OK(http_server_new(&(struct http_server_opts){ .bind = "127.0.0.1:0", .max_body = 16 }, &s));
	ASSERT_OK(http_server_add_standard(s));
	ASSERT_OK(http_server_handle(s, "/echo/", true, echo_handler, NULL));
	ASSERT_OK(http_server_handle(s, "/fail", false, fail_handler, NULL));
	ASSERT_OK(http_server_add_check(s, HTTP_CHECK_READYZ, "synced", ready_check, NULL));
	ASSERT_OK(http_server_start(s));
	int port = http_server_port(s);
	ASSERT_GT(port, 0);

	ASSERT_OK(fetch(port, "POST", "/echo/x?q=1", "hello", &g));
	ASSERT_EQ(g.status, 201);
	ASSERT_STREQ(g.body.data, "POST /echo/x q=1 body=hello");
	buf_release(&g.body);

	ASSERT_OK(fetch(port, "POST", "/echo/x", "this body is longer than sixteen", &g));
	ASSERT_EQ(g.status, 413);
	buf_release(&g.body);

	ASSERT_OK(fetch(port, "GET", "/nope", NULL, &g));
	ASSERT_EQ(g.status, 404);
	buf_release(&g.body);

	ASSERT_OK(fetch(port, "GET", "/fail", NULL, &g));
	ASSERT_EQ(g.status, 500);
	buf_release(&g.body);

	ASSERT_OK(fetch(port, "GET", "/healthz", NULL, &g));
	ASSERT_EQ(g.status, 200);
	ASSERT_STREQ(g.body.data, "ok");
	buf_release(&g.body);

	ready_flag = false;
	ASSERT_OK(fetch(port, "GET", "/readyz", NULL, &g));
	ASSERT_EQ(g.status, 500);
	ASSERT_CONTAINS(g.body.data, "[-]synced failed: informers not synced");
	buf_release(&g.body);

	ready_flag = true;
	ASSERT_OK(fetch(port, "GET", "/readyz?verbose", NULL, &g));
	ASSERT_EQ(g.status, 200);
	ASSERT_CONTAINS(g.body.data, "[+]synced ok");
	ASSERT_CONTAINS(g.body.data, "readyz check passed");
	buf_release(&g.body);

	ASSERT_OK(fetch(port, "GET", "/readyz/synced", NULL, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	ASSERT_OK(fetch(port, "GET", "/readyz/unknown", NULL, &g));
	ASSERT_EQ(g.status, 404);
	buf_release(&g.body);

	ASSERT_OK(fetch(port, "GET", "/metrics", NULL, &g));
	ASSERT_EQ(g.status, 200);
	ASSERT_CONTAINS(g.body.data, "process_resident_memory_bytes");
	buf_release(&g.body);
	http_server_free(s);
	metrics_reset();
}

TEST(http_server_bind_parsing)
{
	char host[64];
	int port = -1;
	ASSERT_OK(http_parse_bind(":10258", host, sizeof(host), &port));
	ASSERT_STREQ(host, "");
	ASSERT_EQ(port, 10258);
	ASSERT_OK(http_parse_bind("0.0.0.0:8080", host, sizeof(host), &port));
	ASSERT_STREQ(host, "0.0.0.0");
	ASSERT_OK(http_parse_bind("[::1]:9", host, sizeof(host), &port));
	ASSERT_STREQ(host, "::1");
	ASSERT_EQ(port, 9);
	ASSERT_ERR(http_parse_bind("8080", host, sizeof(host), &port), EINVAL);
	ASSERT_ERR(http_parse_bind("host:99999", host, sizeof(host), &port), EINVAL);
	ASSERT_ERR(http_parse_bind("[::1:80", host, sizeof(host), &port), EINVAL);
	ASSERT_ERR(http_parse_bind("", host, sizeof(host), &port), EINVAL);
}

TEST(http_server_port_in_use_is_an_error)
{
	struct http_server *a = NULL, *b = NULL;
	char addr[32];
	ASSERT_OK(http_server_new(&(struct http_server_opts){ .bind = "127.0.0.1:0" }, &a));
	ASSERT_OK(http_server_start(a));
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", http_server_port(a));
	ASSERT_OK(http_server_new(&(struct http_server_opts){ .bind = addr }, &b));
	ASSERT_ERR(http_server_start(b), EADDRINUSE);
	http_server_free(b);
	http_server_free(a);
}
