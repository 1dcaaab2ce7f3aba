/* A small HTTP(S) load generator on libcurl's multi interface, for tests/bench/https_server.sh:
 * TOTAL requests of URL with CONCURRENCY in flight, each on a new connection (full TLS
 * handshake, no session resumption) or on kept-alive ones. Prints one line of figures.
 *
 *   https_load URL TOTAL CONCURRENCY fresh|keepalive [CAFILE] */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static size_t discard(char *p, size_t sz, size_t n, void *ud)
{
	return sz * n;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr,
			"usage: https_load URL TOTAL CONCURRENCY fresh|keepalive [CAFILE]\n");
		return 2;
	}
	const char *url = argv[1], *ca = argc > 5 ? argv[5] : NULL;
	char *end1, *end2;
	long total_l = strtol(argv[2], &end1, 10), conc_l = strtol(argv[3], &end2, 10);
	if (*end1 || *end2 || total_l <= 0 || total_l > 1000000 || conc_l <= 0 || conc_l > total_l) {
		fprintf(stderr, "https_load: TOTAL and CONCURRENCY: 1 <= CONCURRENCY <= TOTAL <= 1000000\n");
		return 2;
	}
	int total = (int)total_l, conc = (int)conc_l, fresh = strcmp(argv[4], "fresh") == 0;
	curl_global_init(CURL_GLOBAL_ALL);
	CURLM *m = curl_multi_init();
	CURL **h = calloc((size_t)conc, sizeof(*h));
	double *start = calloc((size_t)conc, sizeof(*start));
	double *lat = calloc((size_t)total, sizeof(*lat));
	int started = 0, done = 0, failed = 0, running = 0;

	for (int i = 0; i < conc; i++) {
		h[i] = curl_easy_init();
		curl_easy_setopt(h[i], CURLOPT_URL, url);
		curl_easy_setopt(h[i], CURLOPT_WRITEFUNCTION, discard);
		curl_easy_setopt(h[i], CURLOPT_PRIVATE, (void *)(long)i);
		curl_easy_setopt(h[i], CURLOPT_TIMEOUT_MS, 30000L);
		curl_easy_setopt(h[i], CURLOPT_NOSIGNAL, 1L);
		if (ca)
			curl_easy_setopt(h[i], CURLOPT_CAINFO, ca);
		if (fresh) {
			curl_easy_setopt(h[i], CURLOPT_FRESH_CONNECT, 1L);
			curl_easy_setopt(h[i], CURLOPT_FORBID_REUSE, 1L);
			curl_easy_setopt(h[i], CURLOPT_SSL_SESSIONID_CACHE, 0L);
		}
	}
	double t0 = now_ms();
	for (int i = 0; i < conc; i++, started++) {
		start[i] = now_ms();
		curl_multi_add_handle(m, h[i]);
	}
	while (done < total) {
		curl_multi_perform(m, &running);
		CURLMsg *msg;
		int left;
		while ((msg = curl_multi_info_read(m, &left))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			long code = 0, i;
			char *priv;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &code);
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
			i = (long)priv;
			if (msg->data.result != CURLE_OK || code != 200)
				failed++;
			lat[done++] = now_ms() - start[i];
			curl_multi_remove_handle(m, h[i]);
			if (started < total) {
				started++;
				start[i] = now_ms();
				curl_multi_add_handle(m, h[i]);
			}
		}
		if (done < total)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	double secs = (now_ms() - t0) / 1e3;
	qsort(lat, (size_t)total, sizeof(*lat), cmp);
	printf("%d requests, %d in flight, %s: %.0f req/s, latency p50 %.1f ms p99 %.1f ms, %d "
	       "failed\n",
	       total, conc, fresh ? "a new connection each" : "kept-alive connections",
	       total / secs, lat[total / 2], lat[total * 99 / 100], failed);
	for (int i = 0; i < conc; i++)
		curl_easy_cleanup(h[i]);
	curl_multi_cleanup(m);
	free(h);
	free(start);
	free(lat);
	curl_global_cleanup();
	return failed ? 1 : 0;
}
