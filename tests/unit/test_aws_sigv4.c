/* SigV4 against botocore: every vector of tests/data/aws/sigv4_vectors.json (made by
 * gen_sigv4_vectors.py) must give the same canonical request, string to sign and Authorization
 * header byte for byte. */
#include <stdlib.h>
#include <string.h>

#include "common/aws/sigv4.h"
#include "common/base/json.h"
#include "common/base/timeutil.h"
#include "tests/unit/harness.h"

static int parse_ts(const char *ts, int64_t *ret)
{
	char iso[32];

	if (strlen(ts) != 16)
		return -EINVAL;
	/* 20150830T123600Z -> 2015-08-30T12:36:00Z */
	snprintf(iso, sizeof(iso), "%.4s-%.2s-%.2sT%.2s:%.2s:%.2sZ", ts, ts + 4, ts + 6, ts + 9,
		 ts + 11, ts + 13);
	return rfc3339_parse(iso, ret);
}

TEST(aws_sigv4_botocore_vectors)
{
	size_t len;
	char *text = test_read_file(test_data("aws/sigv4_vectors.json"), &len);
	cJSON *root = NULL;
	const cJSON *vecs, *v;
	int count = 0;

	ASSERT_NOT_NULL(text);
	ASSERT_OK(json_parse(text, len, &root, NULL));
	free(text);
	ASSERT_OK(json_get_array(root, "vectors", &vecs));
	cJSON_ArrayForEach(v, vecs)
	{
		struct http_header hdrs[16];
		size_t nh = 0;
		const cJSON *h;
		struct aws_credentials cr = {0};
		struct sigv4_input in = {0};
		struct sigv4_output out;
		struct buf creq = BUF_INIT(0), sts = BUF_INIT(0);
		char host[256];
		const char *name = json_str(v, "name"), *body = json_str(v, "body");
		int r;

		cJSON_ArrayForEach(h, cJSON_GetObjectItem(v, "headers"))
		{
			ASSERT_LT(nh, ARRAY_SIZE(hdrs));
			hdrs[nh].name = cJSON_GetArrayItem(h, 0)->valuestring;
			hdrs[nh].value = cJSON_GetArrayItem(h, 1)->valuestring;
			nh++;
		}
		cr.access_key_id = (char *)json_str(v, "access_key");
		cr.secret_access_key = (char *)json_str(v, "secret_key");
		cr.session_token = (char *)json_str(v, "token");
		ASSERT_OK(sigv4_host_from_url(json_str(v, "url"), host, sizeof(host), NULL));
		if (strcmp(host, json_str(v, "host")) != 0)
			test_fail(__FILE__, __LINE__, "%s: host %s vs %s", name, host,
				  json_str(v, "host"));
		in.method = json_str(v, "method");
		in.host = host;
		in.path = json_str(v, "path");
		in.query = json_str(v, "query");
		in.headers = hdrs;
		in.n_headers = nh;
		in.body = body;
		in.body_len = body ? strlen(body) : 0;
		in.region = json_str(v, "region");
		in.service = json_str(v, "service");
		ASSERT_OK(parse_ts(json_str(v, "timestamp"), &in.time_ns));
		r = sigv4_sign_ex(&in, &cr, &out, &creq, &sts);
		if (r < 0) {
			test_fail(__FILE__, __LINE__, "%s: sign failed: %s", name, errno_name(r));
		} else if (strcmp(creq.data, json_str(v, "canonical_request")) != 0) {
			test_fail(__FILE__, __LINE__,
				  "%s: canonical request\n--- ours\n%s\n--- botocore\n%s", name,
				  creq.data, json_str(v, "canonical_request"));
		} else if (strcmp(sts.data, json_str(v, "string_to_sign")) != 0) {
			test_fail(__FILE__, __LINE__, "%s: string to sign\n%s\nvs\n%s", name,
				  sts.data, json_str(v, "string_to_sign"));
		} else if (strcmp(out.authorization, json_str(v, "authorization")) != 0) {
			test_fail(__FILE__, __LINE__, "%s: authorization\n%s\nvs\n%s", name,
				  out.authorization, json_str(v, "authorization"));
		} else if (strcmp(out.amz_date, json_str(v, "amz_date")) != 0) {
			test_fail(__FILE__, __LINE__, "%s: date", name);
		} else {
			count++;
		}
		buf_release(&creq);
		buf_release(&sts);
		if (test_failed)
			break;
	}
	ASSERT_GE(count, 20);
	ASSERT_EQ(count, cJSON_GetArraySize(vecs));
	cJSON_Delete(root);
}

TEST(aws_sigv4_output_headers)
{
	struct aws_credentials cr = {.access_key_id = (char *)"AKID",
				     .secret_access_key = (char *)"secret",
				     .session_token = (char *)"tok"};
	struct sigv4_input in = {.method = "GET",
				 .host = "ec2.us-east-1.amazonaws.com",
				 .region = "us-east-1",
				 .service = "ec2",
				 .time_ns = 0};
	struct sigv4_output out;

	ASSERT_OK(sigv4_sign(&in, &cr, &out));
	ASSERT_EQ(out.n_headers, 3);
	ASSERT_STREQ(out.headers[0].name, "X-Amz-Date");
	ASSERT_STREQ(out.headers[0].value, "19700101T000000Z");
	ASSERT_STREQ(out.headers[1].name, "X-Amz-Security-Token");
	ASSERT_STREQ(out.headers[1].value, "tok");
	ASSERT_STREQ(out.headers[2].name, "Authorization");
	ASSERT_CONTAINS(out.authorization, "Credential=AKID/19700101/us-east-1/ec2/aws4_request");
	ASSERT_CONTAINS(out.authorization, "SignedHeaders=host;x-amz-date;x-amz-security-token,");
	cr.session_token = NULL;
	ASSERT_OK(sigv4_sign(&in, &cr, &out));
	ASSERT_EQ(out.n_headers, 2);
}

TEST(aws_sigv4_refuses_owned_headers)
{
	struct aws_credentials cr = {.access_key_id = (char *)"AKID",
				     .secret_access_key = (char *)"secret"};
	struct http_header h[] = {{"Authorization", "x"}};
	struct sigv4_input in = {.method = "GET",
				 .host = "h",
				 .region = "r",
				 .service = "s",
				 .headers = h,
				 .n_headers = 1};
	struct sigv4_output out;

	ASSERT_ERR(sigv4_sign(&in, &cr, &out), EINVAL);
	h[0].name = "HOST";
	ASSERT_ERR(sigv4_sign(&in, &cr, &out), EINVAL);
	in.n_headers = 0;
	in.region = NULL;
	ASSERT_ERR(sigv4_sign(&in, &cr, &out), EINVAL);
	in.region = "r";
	cr.secret_access_key = NULL;
	ASSERT_ERR(sigv4_sign(&in, &cr, &out), EINVAL);
}

TEST(aws_sigv4_host_from_url)
{
	char h[64];
	const char *rest;

	ASSERT_OK(sigv4_host_from_url("https://EC2.us-east-1.amazonaws.com:443/x?y", h, sizeof(h),
				      &rest));
	ASSERT_STREQ(h, "ec2.us-east-1.amazonaws.com");
	ASSERT_STREQ(rest, "/x?y");
	ASSERT_OK(sigv4_host_from_url("http://user:pw@127.0.0.1:5055", h, sizeof(h), &rest));
	ASSERT_STREQ(h, "127.0.0.1:5055");
	ASSERT_STREQ(rest, "/");
	ASSERT_OK(sigv4_host_from_url("http://h:80/", h, sizeof(h), NULL));
	ASSERT_STREQ(h, "h");
	ASSERT_OK(sigv4_host_from_url("https://h:80/", h, sizeof(h), NULL));
	ASSERT_STREQ(h, "h:80");
	ASSERT_OK(sigv4_host_from_url("http://[::1]:8080/", h, sizeof(h), NULL));
	ASSERT_STREQ(h, "[::1]:8080");
	ASSERT_ERR(sigv4_host_from_url("ftp://h/", h, sizeof(h), NULL), EINVAL);
	ASSERT_ERR(sigv4_host_from_url("http://h:99999999/", h, sizeof(h), NULL), EINVAL);
	ASSERT_ERR(sigv4_host_from_url("http:///x", h, sizeof(h), NULL), EINVAL);
	ASSERT_ERR(sigv4_host_from_url("http://averylonghostname.example.com/", h, 10, NULL),
		   ENAMETOOLONG);
}

TEST(aws_creds_refresh_at)
{
	const int64_t s = 1000000000LL;

	ASSERT_EQ(aws_creds_refresh_at(100 * s, 0), 0);
	ASSERT_EQ(aws_creds_refresh_at(0, 3600 * s), 3300 * s);
	ASSERT_EQ(aws_creds_refresh_at(0, 60 * s), 30 * s);
	ASSERT_EQ(aws_creds_refresh_at(1000 * s, 1600 * s), 1300 * s);
	ASSERT_EQ(aws_creds_refresh_at(10 * s, 5 * s), 10 * s);
}
