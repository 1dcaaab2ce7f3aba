/* Micro-benchmark: time per SigV4 signature of a typical EC2 DescribeInstances POST (form body,
 * session token), with nothing else (no I/O). Built and run by tests/bench/aws_sigv4.sh:
 *   aws_sigv4_bench [ITERATIONS]
 * Prints "sigv4: N signatures, X ns/signature, Y signatures/s". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/aws/sigv4.h"

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;
	static const char body[] =
	    "Action=DescribeInstances&Version=2016-11-15&Filter.1.Name=tag%3Akubernetes.io%2F"
	    "cluster%2Fabc&Filter.1.Value.1=owned&Filter.2.Name=instance-state-name&Filter.2.Value"
	    ".1=pending&Filter.2.Value.2=running&MaxResults=1000";
	struct http_header h[] = {
	    {"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}};
	struct aws_credentials cr = {
	    .access_key_id = (char *)"ASIAEXAMPLEEXAMPLE01",
	    .secret_access_key = (char *)"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	    .session_token = (char *)"IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD"
				     "example-session-token-of-a-realistic-length-0123456789",
	};
	struct sigv4_input in = {
	    .method = "POST",
	    .host = "ec2.us-east-1.amazonaws.com",
	    .path = "/",
	    .headers = h,
	    .n_headers = 1,
	    .body = body,
	    .body_len = sizeof(body) - 1,
	    .region = "us-east-1",
	    .service = "ec2",
	    .time_ns = 1700000000LL * 1000000000LL,
	};
	struct sigv4_output out;
	long long t0, t1;
	unsigned sink = 0;

	if (n < 1)
		n = 1;
	for (long i = 0; i < 1000; i++) /* warm up OpenSSL's method fetches */
		sigv4_sign(&in, &cr, &out);
	/* typical: the same day, so the per-thread signing-key cache hits */
	t0 = now_ns();
	for (long i = 0; i < n; i++) {
		in.time_ns += 1000000000LL;
		if (sigv4_sign(&in, &cr, &out) < 0) {
			fprintf(stderr, "sign failed\n");
			return 1;
		}
		sink += (unsigned char)out.authorization[strlen(out.authorization) - 1];
	}
	t1 = now_ns();
	printf("sigv4: %ld signatures, %.0f ns/signature, %.0f signatures/s (signing key cached)\n",
	       n, (double)(t1 - t0) / (double)n, (double)n * 1e9 / (double)(t1 - t0));
	/* cold: a new day each time, so the signing key is derived again (4 more HMACs) */
	t0 = now_ns();
	for (long i = 0; i < n; i++) {
		in.time_ns += 86400LL * 1000000000LL;
		if (sigv4_sign(&in, &cr, &out) < 0) {
			fprintf(stderr, "sign failed\n");
			return 1;
		}
		sink += (unsigned char)out.authorization[strlen(out.authorization) - 1];
	}
	t1 = now_ns();
	printf("sigv4: %ld signatures, %.0f ns/signature, %.0f signatures/s (signing key derived "
	       "each time) [%u]\n",
	       n, (double)(t1 - t0) / (double)n, (double)n * 1e9 / (double)(t1 - t0), sink % 10);
	return 0;
}
