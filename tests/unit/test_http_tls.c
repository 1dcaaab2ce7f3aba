/* HTTPS serving (common/http/tls.c, tls_relay.c behind server.c): certificates made with
 * common/x509, requests through libcurl and, for the clients that misbehave, through raw
 * sockets and OpenSSL. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/base/fileutil.h"
#include "common/base/secret.h"
#include "common/base/timeutil.h"
#include "common/http/server.h"
#include "common/x509/x509.h"
#include "tests/unit/harness.h"

struct got {
	long status;
	struct buf body;
};

/* What a test client presents. */
struct client {
	const char *ca;		/* PEM of the CA to verify the server with */
	const char *cert, *key; /* a client certificate */
	long version;		/* CURLOPT_SSLVERSION */
	const char *ciphers;	/* OpenSSL's names, TLS <= 1.2 */
};

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
	struct got *g = ud;
	return buf_append(&g->body, p, sz * n) == 0 ? sz * n : 0;
}

static void blob(CURL *c, CURLoption o, const char *pem)
{
	struct curl_blob b = {(void *)pem, strlen(pem), CURL_BLOB_COPY};
	curl_easy_setopt(c, o, &b);
}

static CURL *client_handle(int port, const char *path, const struct client *cl, struct got *g)
{
	char url[256];
	CURL *c = curl_easy_init();

	if (!c)
		return NULL;
	snprintf(url, sizeof(url), "https://127.0.0.1:%d%s", port, path);
	buf_init(&g->body, 0);
	g->status = 0;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, g);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	blob(c, CURLOPT_CAINFO_BLOB, cl->ca);
	if (cl->cert) {
		blob(c, CURLOPT_SSLCERT_BLOB, cl->cert);
		curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
		blob(c, CURLOPT_SSLKEY_BLOB, cl->key);
		curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
	}
	if (cl->version)
		curl_easy_setopt(c, CURLOPT_SSLVERSION, cl->version);
	if (cl->ciphers)
		curl_easy_setopt(c, CURLOPT_SSL_CIPHER_LIST, cl->ciphers);
	return c;
}

/* 0 with the reply in g, or -EIO when the request failed (a refused handshake). */
static int fetch(int port, const char *path, const struct client *cl, struct got *g)
{
	CURL *c = client_handle(port, path, cl, g);
	if (!c)
		return -ENOMEM;
	CURLcode rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &g->status);
	curl_easy_cleanup(c);
	return rc == CURLE_OK ? 0 : -EIO;
}

/* A request that must fail: 0 when it did. */
static int refused(int port, const struct client *cl)
{
	struct got g;
	int r = fetch(port, "/who", cl, &g);
	buf_release(&g.body);
	return r == -EIO ? 0 : -EPROTO;
}

static int who_handler(void *ud, const struct http_server_request *req,
		       struct http_server_reply *rep)
{
	const struct http_client_cert *cc = req->client_cert;

	if (!cc)
		return buf_printf(&rep->body, "anonymous from %s", req->remote_addr);
	buf_printf(&rep->body, "user=%s groups=", cc->cn);
	for (size_t i = 0; cc->orgs[i]; i++)
		buf_printf(&rep->body, "%s%s", i ? "," : "", cc->orgs[i]);
	return 0;
}

/* A CA, and pairs it signs. */
struct pki {
	struct x509_key *ca_key;
	struct x509_cert *ca;
	char *ca_pem;
};

static int pki_new(struct pki *p, const char *cn)
{
	struct x509_spec s = {.cn = cn, .ca = true, .duration_s = X509_YEAR};
	int r = x509_key_new_ec(&p->ca_key, NULL, 0);
	if (r >= 0)
		r = x509_cert_self_signed(&s, p->ca_key, &p->ca, NULL, 0);
	if (r >= 0)
		r = x509_cert_to_pem(p->ca, &p->ca_pem, NULL, 0);
	return r;
}

static void pki_release(struct pki *p)
{
	x509_key_free(p->ca_key);
	x509_cert_free(p->ca);
	free(p->ca_pem);
}

static int pki_issue(struct pki *p, const struct x509_spec *s, char **ret_cert, char **ret_key)
{
	struct x509_key *k = NULL;
	struct x509_cert *c = NULL;
	int r = x509_key_new_ec(&k, NULL, 0);
	if (r >= 0)
		r = x509_cert_signed(s, k, p->ca, p->ca_key, &c, NULL, 0);
	if (r >= 0)
		r = x509_cert_to_pem(c, ret_cert, NULL, 0);
	if (r >= 0)
		r = x509_key_to_pem(k, ret_key, NULL, 0);
	x509_cert_free(c);
	x509_key_free(k);
	return r;
}

static const char *const loopback[] = {"127.0.0.1", NULL};

/* A self-signed serving pair for 127.0.0.1, as the ccm makes one. */
static int serving_pair(char **cert, char **key)
{
	struct x509_spec s = {.cn = "localhost",
			      .ips = loopback,
			      .ca = true,
			      .usages = X509_USAGE_SERVER,
			      .duration_s = X509_YEAR};
	return x509_self_signed_pem(&s, cert, key, NULL, 0);
}

static int start(struct http_server_opts *o, struct http_server **ret)
{
	int r;

	if (!o->bind)
		o->bind = "127.0.0.1:0";
	if ((r = http_server_new(o, ret)) < 0)
		return r;
	if ((r = http_server_handle(*ret, "/who", false, who_handler, NULL)) < 0 ||
	    (r = http_server_start(*ret)) < 0) {
		http_server_free(*ret);
		*ret = NULL;
	}
	return r;
}

TEST(http_tls_serves_https_with_a_generated_certificate)
{
	_cleanup_free_ char *cert = NULL;
	_cleanup_secret_ char *key = NULL;
	struct http_server *s = NULL;
	struct got g;

	ASSERT_OK(serving_pair(&cert, &key));
	ASSERT_OK(start(&(struct http_server_opts){.tls = {.cert_pem = cert, .key_pem = key}}, &s));
	int port = http_server_port(s);
	ASSERT_OK(fetch(port, "/who", &(struct client){.ca = cert}, &g));
	ASSERT_EQ(g.status, 200);
	ASSERT_TRUE(str_has_prefix(g.body.data, "anonymous from 127.0.0.1:"));
	buf_release(&g.body);
	ASSERT_OK(fetch(port, "/nope", &(struct client){.ca = cert}, &g));
	ASSERT_EQ(g.status, 404);
	buf_release(&g.body);

	/* the certificate is the one given: another CA does not verify it */
	_cleanup_free_ char *other = NULL;
	_cleanup_secret_ char *other_key = NULL;
	ASSERT_OK(serving_pair(&other, &other_key));
	ASSERT_OK(refused(port, &(struct client){.ca = other}));

	/* and the port speaks TLS only */
	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/who", port);
	CURL *c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	buf_init(&g.body, 0);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
	CURLcode rc = curl_easy_perform(c);
	curl_easy_cleanup(c);
	buf_release(&g.body);
	ASSERT_NE(rc, CURLE_OK);
	http_server_free(s);
}

/* The thread model of a proxy (kube-rbac-proxy's): a thread per connection, identities too. */
TEST(http_tls_thread_per_connection)
{
	struct pki ca = {0};
	_cleanup_free_ char *cert = NULL, *alice = NULL;
	_cleanup_secret_ char *key = NULL, *alice_key = NULL;
	static const char *const groups[] = {"dev", NULL};
	struct http_server *s = NULL;
	struct got g;

	ASSERT_OK(serving_pair(&cert, &key));
	ASSERT_OK(pki_new(&ca, "client-ca"));
	ASSERT_OK(pki_issue(&ca,
			    &(struct x509_spec){.cn = "alice",
						.orgs = groups,
						.usages = X509_USAGE_CLIENT,
						.duration_s = X509_YEAR},
			    &alice, &alice_key));
	ASSERT_OK(start(&(struct http_server_opts){.tls = {.cert_pem = cert,
							   .key_pem = key,
							   .client_ca_pem = ca.ca_pem,
							   .client_auth = HTTP_TLS_CLIENT_REQUEST},
						   .thread_per_connection = true},
			&s));
	ASSERT_OK(fetch(http_server_port(s), "/who",
			&(struct client){.ca = cert, .cert = alice, .key = alice_key}, &g));
	ASSERT_STREQ(g.body.data, "user=alice groups=dev");
	buf_release(&g.body);
	ASSERT_OK(fetch(http_server_port(s), "/who", &(struct client){.ca = cert}, &g));
	ASSERT_TRUE(str_has_prefix(g.body.data, "anonymous from 127.0.0.1:"));
	buf_release(&g.body);
	http_server_free(s);
	pki_release(&ca);
}

TEST(http_tls_bad_configurations_fail_at_new)
{
	_cleanup_free_ char *cert = NULL, *other = NULL;
	_cleanup_secret_ char *key = NULL, *other_key = NULL;
	struct http_server *s = NULL;
	char err[256] = "";

	ASSERT_OK(serving_pair(&cert, &key));
	ASSERT_OK(serving_pair(&other, &other_key));
	ASSERT_ERR(http_server_new(&(struct http_server_opts){.tls = {.cert_pem = cert}}, &s),
		   EINVAL);
	ASSERT_ERR(http_server_new(&(struct http_server_opts){.tls = {.key_pem = key}}, &s),
		   EINVAL);
	ASSERT_ERR(http_server_new(
		       &(struct http_server_opts){.tls = {.cert_pem = "junk", .key_pem = key}}, &s),
		   EBADMSG);
	ASSERT_ERR(
	    http_server_new(
		&(struct http_server_opts){.tls = {.cert_pem = cert, .key_pem = other_key}}, &s),
	    EKEYREJECTED);
	ASSERT_ERR(
	    http_server_new(
		&(struct http_server_opts){
		    .tls = {.cert_pem = cert, .key_pem = key, .min_version = "VersionTLS14"}},
		&s),
	    EINVAL);
	ASSERT_ERR(http_server_new(&(struct http_server_opts){.tls = {.cert_file = "/nonexistent",
								      .key_pem = key}},
				   &s),
		   ENOENT);

	ASSERT_OK(http_tls_check(&(struct http_tls){.min_version = "VersionTLS13",
						    .cipher_suites =
							"TLS_AES_128_GCM_SHA256, "
							"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
				 err, sizeof(err)));
	ASSERT_ERR(
	    http_tls_check(&(struct http_tls){.cipher_suites = "TLS_ECDHE_RSA_WITH_AES_128_"
							       "GCM_SHA256,ECDHE-RSA-AES128-SHA"},
			   err, sizeof(err)),
	    EINVAL);
	ASSERT_CONTAINS(err, "'ECDHE-RSA-AES128-SHA'");
	ASSERT_ERR(http_tls_check(&(struct http_tls){.min_version = "TLS1.2"}, err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "'TLS1.2'");
}

TEST(http_tls_minimum_version)
{
	_cleanup_free_ char *cert = NULL;
	_cleanup_secret_ char *key = NULL;
	struct http_server *s = NULL;
	struct got g;
	/* OpenSSL 3 clients need security level 0 for TLS 1.1 */
	struct client v11 = {.version = CURL_SSLVERSION_TLSv1_1 | CURL_SSLVERSION_MAX_TLSv1_1,
			     .ciphers = "DEFAULT:@SECLEVEL=0"};
	struct client v12 = {.version = CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2};
	struct client v13 = {.version = CURL_SSLVERSION_TLSv1_3};

	ASSERT_OK(serving_pair(&cert, &key));
	v11.ca = v12.ca = v13.ca = cert;

	/* the default: TLS 1.2 and up */
	ASSERT_OK(start(&(struct http_server_opts){.tls = {.cert_pem = cert, .key_pem = key}}, &s));
	ASSERT_OK(refused(http_server_port(s), &v11));
	ASSERT_OK(fetch(http_server_port(s), "/who", &v12, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	ASSERT_OK(fetch(http_server_port(s), "/who", &v13, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	http_server_free(s);

	/* asked for, TLS 1.1 is served (so the refusal above is the minimum's doing) */
	ASSERT_OK(start(
	    &(struct http_server_opts){
		.tls = {.cert_pem = cert, .key_pem = key, .min_version = "VersionTLS10"}},
	    &s));
	ASSERT_OK(fetch(http_server_port(s), "/who", &v11, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	http_server_free(s);

	ASSERT_OK(start(
	    &(struct http_server_opts){
		.tls = {.cert_pem = cert, .key_pem = key, .min_version = "VersionTLS13"}},
	    &s));
	ASSERT_OK(refused(http_server_port(s), &v12));
	ASSERT_OK(fetch(http_server_port(s), "/who", &v13, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	http_server_free(s);
}

TEST(http_tls_cipher_suites_restrict_tls12)
{
	_cleanup_free_ char *cert = NULL;
	_cleanup_secret_ char *key = NULL;
	struct http_server *s = NULL;
	struct got g;
	long v12 = CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2;
	struct client aes128 = {.version = v12, .ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256"};
	struct client aes256 = {.version = v12, .ciphers = "ECDHE-ECDSA-AES256-GCM-SHA384"};
	struct client cbc256 = {.version = v12, .ciphers = "AES256-SHA256"};

	ASSERT_OK(serving_pair(&cert, &key)); /* an EC key: the ECDSA suites */
	aes128.ca = aes256.ca = cbc256.ca = cert;

	/* Go's defaults: AES-GCM yes, CBC with SHA-256 no */
	ASSERT_OK(start(&(struct http_server_opts){.tls = {.cert_pem = cert, .key_pem = key}}, &s));
	ASSERT_OK(fetch(http_server_port(s), "/who", &aes128, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	ASSERT_OK(refused(http_server_port(s), &cbc256));
	http_server_free(s);

	ASSERT_OK(start(
	    &(struct http_server_opts){
		.tls = {.cert_pem = cert,
			.key_pem = key,
			.cipher_suites = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"}},
	    &s));
	ASSERT_OK(refused(http_server_port(s), &aes128));
	ASSERT_OK(fetch(http_server_port(s), "/who", &aes256, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	/* TLS 1.3 is not restricted, as in Go */
	ASSERT_OK(fetch(http_server_port(s), "/who",
			&(struct client){.ca = cert, .version = CURL_SSLVERSION_TLSv1_3}, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	http_server_free(s);
}

TEST(http_tls_client_certificates)
{
	struct pki ca = {0}, rogue = {0};
	_cleanup_free_ char *cert = NULL, *alice = NULL, *mallory = NULL, *bob = NULL;
	_cleanup_secret_ char *key = NULL, *alice_key = NULL, *mallory_key = NULL, *bob_key = NULL;
	static const char *const groups[] = {"dev", "system:masters", NULL};
	struct http_server *s = NULL;
	struct got g;

	ASSERT_OK(serving_pair(&cert, &key));
	ASSERT_OK(pki_new(&ca, "client-ca"));
	ASSERT_OK(pki_new(&rogue, "client-ca")); /* the same name, another key */
	ASSERT_OK(pki_issue(&ca,
			    &(struct x509_spec){.cn = "alice",
						.orgs = groups,
						.usages = X509_USAGE_CLIENT,
						.duration_s = X509_YEAR},
			    &alice, &alice_key));
	ASSERT_OK(pki_issue(
	    &ca,
	    &(struct x509_spec){.cn = "bob", .usages = X509_USAGE_CLIENT, .duration_s = X509_YEAR},
	    &bob, &bob_key));
	ASSERT_OK(pki_issue(&rogue,
			    &(struct x509_spec){.cn = "alice",
						.orgs = groups,
						.usages = X509_USAGE_CLIENT,
						.duration_s = X509_YEAR},
			    &mallory, &mallory_key));
	struct client as_alice = {.ca = cert, .cert = alice, .key = alice_key};
	struct client as_bob = {.ca = cert, .cert = bob, .key = bob_key};
	struct client as_mallory = {.ca = cert, .cert = mallory, .key = mallory_key};
	struct client nobody = {.ca = cert};

	/* required (the default with a CA) */
	ASSERT_OK(start(
	    &(struct http_server_opts){
		.tls = {.cert_pem = cert, .key_pem = key, .client_ca_pem = ca.ca_pem}},
	    &s));
	int port = http_server_port(s);
	ASSERT_OK(fetch(port, "/who", &as_alice, &g));
	ASSERT_EQ(g.status, 200);
	ASSERT_STREQ(g.body.data, "user=alice groups=dev,system:masters");
	buf_release(&g.body);
	ASSERT_OK(fetch(port, "/who", &as_bob, &g));
	ASSERT_STREQ(g.body.data, "user=bob groups=");
	buf_release(&g.body);
	ASSERT_OK(refused(port, &nobody));
	ASSERT_OK(refused(port, &as_mallory));
	/* TLS 1.2 too (the certificate comes in another place of the handshake) */
	as_alice.version = CURL_SSLVERSION_TLSv1_2 | CURL_SSLVERSION_MAX_TLSv1_2;
	ASSERT_OK(fetch(port, "/who", &as_alice, &g));
	ASSERT_STREQ(g.body.data, "user=alice groups=dev,system:masters");
	buf_release(&g.body);
	as_alice.version = 0;
	http_server_free(s);

	/* requested, as kube-rbac-proxy: no certificate or a foreign one is anonymous */
	ASSERT_OK(start(&(struct http_server_opts){.tls = {.cert_pem = cert,
							   .key_pem = key,
							   .client_ca_pem = ca.ca_pem,
							   .client_auth = HTTP_TLS_CLIENT_REQUEST}},
			&s));
	port = http_server_port(s);
	ASSERT_OK(fetch(port, "/who", &nobody, &g));
	ASSERT_TRUE(str_has_prefix(g.body.data, "anonymous"));
	buf_release(&g.body);
	ASSERT_OK(fetch(port, "/who", &as_mallory, &g));
	ASSERT_TRUE(str_has_prefix(g.body.data, "anonymous"));
	buf_release(&g.body);
	ASSERT_OK(fetch(port, "/who", &as_alice, &g));
	ASSERT_STREQ(g.body.data, "user=alice groups=dev,system:masters");
	buf_release(&g.body);

	/* many connections at once, each with its own identity */
	CURLM *m = curl_multi_init();
	struct got gs[40];
	CURL *hs[40];
	for (int i = 0; i < 40; i++) {
		const struct client *cl = i % 3 == 0 ? &as_alice : i % 3 == 1 ? &as_bob : &nobody;
		hs[i] = client_handle(port, "/who", cl, &gs[i]);
		curl_easy_setopt(hs[i], CURLOPT_FRESH_CONNECT, 1L);
		curl_multi_add_handle(m, hs[i]);
	}
	int running = 1;
	while (running) {
		curl_multi_perform(m, &running);
		curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	int wrong = 0;
	for (int i = 0; i < 40; i++) {
		const char *want = i % 3 == 0	? "user=alice"
				   : i % 3 == 1 ? "user=bob"
						: "anonymous";
		if (!gs[i].body.data || !str_has_prefix(gs[i].body.data, want))
			wrong++;
		curl_multi_remove_handle(m, hs[i]);
		curl_easy_cleanup(hs[i]);
		buf_release(&gs[i].body);
	}
	curl_multi_cleanup(m);
	ASSERT_EQ(wrong, 0);
	http_server_free(s);
	pki_release(&ca);
	pki_release(&rogue);
}

static int dial(int port, int rcvbuf)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && rcvbuf > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* True when the server closed fd within timeout_ms (reads until the end of the stream). */
static bool closed_within(int fd, int timeout_ms)
{
	int64_t end = now_mono_ns() + timeout_ms * NSEC_PER_MSEC;
	char b[4096];

	for (;;) {
		int left = (int)((end - now_mono_ns()) / NSEC_PER_MSEC);
		struct pollfd p = {fd, POLLIN, 0};
		if (left <= 0 || poll(&p, 1, left) <= 0)
			return false;
		ssize_t n = recv(fd, b, sizeof(b), 0);
		if (n <= 0)
			return true;
	}
}

/* A TLS client over a blocking socket (rcvbuf: its receive buffer, 0 for the default),
 * handshake done. */
static SSL *tls_dial(SSL_CTX *ctx, int port, int rcvbuf, int *ret_fd)
{
	int fd = dial(port, rcvbuf);
	SSL *ssl = fd >= 0 ? SSL_new(ctx) : NULL;

	if (!ssl || SSL_set_fd(ssl, fd) != 1 || SSL_connect(ssl) != 1) {
		SSL_free(ssl);
		if (fd >= 0)
			close(fd);
		ERR_clear_error();
		return NULL;
	}
	*ret_fd = fd;
	return ssl;
}

TEST(http_tls_idle_and_stalled_clients_are_dropped)
{
	_cleanup_free_ char *cert = NULL;
	_cleanup_secret_ char *key = NULL;
	struct http_server *s = NULL;
	int idle[50], half = -1, stalled_fd = -1;
	struct got g;

	ASSERT_OK(serving_pair(&cert, &key));
	ASSERT_OK(
	    start(&(struct http_server_opts){.tls = {.cert_pem = cert,
						     .key_pem = key,
						     .handshake_timeout_ns = 500 * NSEC_PER_MSEC},
					     .connection_timeout_ns = NSEC_PER_SEC},
		  &s));
	int port = http_server_port(s);
	for (int i = 0; i < 50; i++)
		ASSERT_TRUE((idle[i] = dial(port, 0)) >= 0);
	/* half a TLS record header, then nothing */
	ASSERT_TRUE((half = dial(port, 0)) >= 0);
	ASSERT_EQ(send(half, "\x16\x03\x01", 3, 0), 3);

	/* a good client is served while they hang */
	int64_t t0 = now_mono_ns();
	ASSERT_OK(fetch(port, "/who", &(struct client){.ca = cert}, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	ASSERT_LT(now_mono_ns() - t0, 400 * NSEC_PER_MSEC);

	/* a client that finishes its handshake, starts a request and stalls: MHD's timeout */
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	SSL *stalled = tls_dial(cctx, port, 0, &stalled_fd);
	ASSERT_NOT_NULL(stalled);
	ASSERT_EQ(SSL_write(stalled, "GET /who HTTP/1.1\r\nHost: x\r\n", 28), 28);

	/* the idle ones go at the handshake timeout, not before */
	ASSERT_FALSE(closed_within(idle[0], 100));
	for (int i = 0; i < 50; i++)
		ASSERT_TRUE(closed_within(idle[i], 1500));
	ASSERT_TRUE(closed_within(half, 500));
	int64_t dropped = now_mono_ns() - t0;
	ASSERT_GE(dropped, 400 * NSEC_PER_MSEC);
	ASSERT_TRUE(closed_within(stalled_fd, 3000));

	for (int i = 0; i < 50; i++)
		close(idle[i]);
	close(half);
	SSL_free(stalled);
	close(stalled_fd);
	SSL_CTX_free(cctx);

	/* and the server still serves */
	ASSERT_OK(fetch(port, "/who", &(struct client){.ca = cert}, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	http_server_free(s);
}

TEST(http_tls_connections_are_capped)
{
	_cleanup_free_ char *cert = NULL;
	_cleanup_secret_ char *key = NULL;
	struct http_server *s = NULL;
	int idle[4], extra;
	struct got g;

	ASSERT_OK(serving_pair(&cert, &key));
	ASSERT_OK(start(&(struct http_server_opts){.tls = {.cert_pem = cert, .key_pem = key},
						   .max_connections = 4},
			&s));
	int port = http_server_port(s);
	for (int i = 0; i < 4; i++)
		ASSERT_TRUE((idle[i] = dial(port, 0)) >= 0);
	/* a fifth is closed at once, not left to its handshake timeout */
	ASSERT_TRUE((extra = dial(port, 0)) >= 0);
	ASSERT_TRUE(closed_within(extra, 1000));
	close(extra);
	ASSERT_OK(refused(port, &(struct client){.ca = cert}));
	/* one slot freed, a client is served */
	close(idle[0]);
	sleep_ns(100 * NSEC_PER_MSEC);
	ASSERT_OK(fetch(port, "/who", &(struct client){.ca = cert}, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	for (int i = 1; i < 4; i++)
		close(idle[i]);
	http_server_free(s);
}

/* n requests at once, each on a new connection: how many got 200. */
static int concurrent(int port, int n, const struct client *cl)
{
	CURLM *m = curl_multi_init();
	struct got *gs = calloc((size_t)n, sizeof(*gs));
	CURL **hs = calloc((size_t)n, sizeof(*hs));
	int running = 1, ok = 0;

	for (int i = 0; i < n; i++) {
		hs[i] = client_handle(port, "/who", cl, &gs[i]);
		curl_easy_setopt(hs[i], CURLOPT_FRESH_CONNECT, 1L);
		curl_easy_setopt(hs[i], CURLOPT_FORBID_REUSE, 1L);
		/* a count, not a timing test: 200 handshakes on a loaded machine may take a while */
		curl_easy_setopt(hs[i], CURLOPT_TIMEOUT_MS, 60000L);
		curl_multi_add_handle(m, hs[i]);
	}
	while (running) {
		curl_multi_perform(m, &running);
		curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	for (int i = 0; i < n; i++) {
		long st = 0;
		curl_easy_getinfo(hs[i], CURLINFO_RESPONSE_CODE, &st);
		ok += st == 200;
		curl_multi_remove_handle(m, hs[i]);
		curl_easy_cleanup(hs[i]);
		buf_release(&gs[i].body);
	}
	curl_multi_cleanup(m);
	free(gs);
	free(hs);
	return ok;
}

TEST(http_tls_200_concurrent_requests)
{
	_cleanup_free_ char *cert = NULL;
	_cleanup_secret_ char *key = NULL;
	struct http_server *s = NULL;

	ASSERT_OK(serving_pair(&cert, &key));
	ASSERT_OK(start(
	    &(struct http_server_opts){.tls = {.cert_pem = cert, .key_pem = key}, .threads = 2},
	    &s));
	ASSERT_EQ(concurrent(http_server_port(s), 200, &(struct client){.ca = cert}), 200);
	http_server_free(s);
}

/* n bytes of a pattern, the same for the sender and the checker */
static char pattern(size_t i)
{
	return (char)('a' + (i * 7 + i / 4093) % 26);
}

/* The state of the server's end of a loopback TCP connection (/proc/net/tcp), or -1. */
static int tcp_state(int server_port, int client_port)
{
	_cleanup_free_ char *t = NULL;
	char want[64];
	unsigned st;

	if (file_read_all("/proc/net/tcp", 16 << 20, &t, NULL) < 0)
		return -1;

	snprintf(want, sizeof(want), ":%04X 0100007F:%04X ", server_port, client_port);
	const char *at = t ? strstr(t, want) : NULL;
	return at && sscanf(at + strlen(want), "%x", &st) == 1 ? (int)st : -1;
}

/* A reply of ?mb= MiB, after checking the request's body. */
static int big_handler(void *ud, const struct http_server_request *req,
		       struct http_server_reply *rep)
{
	const char *mb = http_request_query(req, "mb");
	size_t n = (size_t)(mb ? atoi(mb) : 1) << 20, bad = 0;
	int r = buf_reserve(&rep->body, n);

	for (size_t i = 0; i < req->body_len; i++)
		bad += req->body[i] != pattern(i);
	if (r < 0 || bad)
		return r < 0 ? r : -EBADMSG;
	for (size_t i = 0; i < n; i++)
		rep->body.data[i] = pattern(i);
	rep->body.len = n;
	rep->body.data[n] = 0;
	return 0;
}

TEST(http_tls_large_bodies_and_a_client_that_does_not_read)
{
	_cleanup_free_ char *cert = NULL, *body = malloc(900 << 10);
	_cleanup_secret_ char *key = NULL;
	struct http_server *s = NULL;
	struct got g;
	int fd = -1;

	ASSERT_OK(serving_pair(&cert, &key));
	ASSERT_OK(
	    http_server_new(&(struct http_server_opts){.bind = "127.0.0.1:0",
						       .tls = {.cert_pem = cert, .key_pem = key},
						       .connection_timeout_ns = NSEC_PER_SEC},
			    &s));
	ASSERT_OK(http_server_handle(s, "/big", false, big_handler, NULL));
	ASSERT_OK(http_server_start(s));
	int port = http_server_port(s);

	/* 900 KiB up, 3 MiB down, checked byte for byte on both sides */
	for (size_t i = 0; i < (900 << 10); i++)
		body[i] = pattern(i);
	CURL *c = client_handle(port, "/big?mb=3", &(struct client){.ca = cert}, &g);
	buf_init(&g.body, 4 << 20);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(900 << 10));
	ASSERT_EQ(curl_easy_perform(c), CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &g.status);
	curl_easy_cleanup(c);
	ASSERT_EQ(g.status, 200);
	ASSERT_EQ(g.body.len, 3 << 20);
	size_t bad = 0;
	for (size_t i = 0; i < g.body.len; i++)
		bad += g.body.data[i] != pattern(i);
	buf_release(&g.body);
	ASSERT_EQ(bad, 0);

	/* asks for 12 MiB (more than the sockets hold) and reads none of it: dropped after the
	 * connection timeout, by the relay (its write to the client blocked) and by MHD */
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	SSL *ssl = tls_dial(cctx, port, 16384, &fd);
	ASSERT_NOT_NULL(ssl);
	const char *req = "GET /big?mb=12 HTTP/1.1\r\nHost: x\r\n\r\n";
	ASSERT_GT(SSL_write(ssl, req, (int)strlen(req)), 0);
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	ASSERT_OK(getsockname(fd, (struct sockaddr *)&me, &ml));
	sleep_ns(500 * NSEC_PER_MSEC);
	ASSERT_EQ(tcp_state(port, ntohs(me.sin_port)), TCP_ESTABLISHED);
	sleep_ns(2500 * NSEC_PER_MSEC);
	/* the server's end is closed, its queue still going out (FIN_WAIT1) */
	ASSERT_NE(tcp_state(port, ntohs(me.sin_port)), TCP_ESTABLISHED);
	/* what the sockets held, then the end of the stream well before 12 MiB */
	char b[65536];
	size_t got = 0;
	ssize_t n;
	struct pollfd p = {fd, POLLIN, 0};
	while (poll(&p, 1, 2000) > 0 && (n = recv(fd, b, sizeof(b), 0)) > 0)
		got += (size_t)n;
	ASSERT_GT(got, 0);
	ASSERT_LT(got, 10 << 20);
	ASSERT_TRUE(closed_within(fd, 100));
	SSL_free(ssl);
	close(fd);
	SSL_CTX_free(cctx);

	/* still serving */
	ASSERT_OK(fetch(port, "/nope", &(struct client){.ca = cert}, &g));
	ASSERT_EQ(g.status, 404);
	buf_release(&g.body);
	http_server_free(s);
}

TEST(http_tls_stop_with_open_connections)
{
	_cleanup_free_ char *cert = NULL;
	_cleanup_secret_ char *key = NULL;
	struct http_server *s = NULL;
	int idle[10], fds[10];
	SSL *open_[10];
	char b[512];

	ASSERT_OK(serving_pair(&cert, &key));
	ASSERT_OK(start(&(struct http_server_opts){.tls = {.cert_pem = cert, .key_pem = key}}, &s));
	int port = http_server_port(s);
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	for (int i = 0; i < 10; i++) {
		ASSERT_TRUE((idle[i] = dial(port, 0)) >= 0);
		ASSERT_NOT_NULL(open_[i] = tls_dial(cctx, port, 0, &fds[i]));
		/* a kept-alive connection after a reply, or one mid-request */
		const char *req =
		    i % 2 ? "GET /who HTTP/1.1\r\nHost: x\r\n\r\n" : "GET /who HTTP/1.1\r\n";
		ASSERT_GT(SSL_write(open_[i], req, (int)strlen(req)), 0);
		if (i % 2)
			ASSERT_GT(SSL_read(open_[i], b, sizeof(b)), 0);
	}
	int64_t t0 = now_mono_ns();
	http_server_free(s);
	ASSERT_LT(now_mono_ns() - t0, 1000 * NSEC_PER_MSEC);
	for (int i = 0; i < 10; i++) {
		ASSERT_TRUE(closed_within(idle[i], 100));
		ASSERT_TRUE(closed_within(fds[i], 100));
		close(idle[i]);
		SSL_free(open_[i]);
		close(fds[i]);
	}
	SSL_CTX_free(cctx);
}

static int write_file(const char *dir, const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return file_write_atomic(path, text, strlen(text), 0600);
}

TEST(http_tls_files_are_reloaded_when_they_change)
{
	_cleanup_free_ char *c1 = NULL, *c2 = NULL, *c3 = NULL;
	_cleanup_secret_ char *k1 = NULL, *k2 = NULL, *k3 = NULL;
	char cf[512], kf[512];
	const char *d = test_tmpdir();
	struct http_server *s = NULL;
	struct got g;

	ASSERT_OK(serving_pair(&c1, &k1));
	ASSERT_OK(serving_pair(&c2, &k2));
	ASSERT_OK(serving_pair(&c3, &k3));
	ASSERT_OK(write_file(d, "tls.crt", c1));
	ASSERT_OK(write_file(d, "tls.key", k1));
	snprintf(cf, sizeof(cf), "%s/tls.crt", d);
	snprintf(kf, sizeof(kf), "%s/tls.key", d);
	ASSERT_OK(start(
	    &(struct http_server_opts){
		.tls = {.cert_file = cf, .key_file = kf, .reload_check_ns = 50 * NSEC_PER_MSEC}},
	    &s));
	int port = http_server_port(s);
	ASSERT_OK(fetch(port, "/who", &(struct client){.ca = c1}, &g));
	buf_release(&g.body);

	ASSERT_OK(write_file(d, "tls.crt", c2));
	ASSERT_OK(write_file(d, "tls.key", k2));
	sleep_ns(100 * NSEC_PER_MSEC);
	ASSERT_OK(fetch(port, "/who", &(struct client){.ca = c2}, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	ASSERT_OK(refused(port, &(struct client){.ca = c1}));

	/* half a rotation (a new certificate, the old key): the working pair stays */
	ASSERT_OK(write_file(d, "tls.crt", c3));
	sleep_ns(100 * NSEC_PER_MSEC);
	ASSERT_OK(fetch(port, "/who", &(struct client){.ca = c2}, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	/* the rotation done */
	ASSERT_OK(write_file(d, "tls.key", k3));
	sleep_ns(100 * NSEC_PER_MSEC);
	ASSERT_OK(fetch(port, "/who", &(struct client){.ca = c3}, &g));
	ASSERT_EQ(g.status, 200);
	buf_release(&g.body);
	http_server_free(s);
}
