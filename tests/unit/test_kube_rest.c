/* REST paths, query strings (selectors), Status errors and their errno mapping. */
#include <stdlib.h>

#include "common/base/buf.h"
#include "common/base/timeutil.h"
#include "common/kube/rest.h"
#include "tests/unit/harness.h"

static const char *path_of(const struct kube_ref *ref, struct buf *b)
{
	buf_reset(b);
	return kube_path(ref, b) < 0 ? "<error>" : b->data;
}

TEST(kube_rest_paths)
{
	_cleanup_buf_ struct buf b = BUF_INIT(0);
	static const struct kube_resource widgets = {"example.com", "v1alpha1", "widgets", "Widget",
						     true};

	ASSERT_STREQ(path_of(KUBE_REF(&kube_pods, "default", "web-0"), &b),
		     "/api/v1/namespaces/default/pods/web-0");
	ASSERT_STREQ(path_of(KUBE_REF(&kube_pods, NULL, NULL), &b), "/api/v1/pods");
	ASSERT_STREQ(path_of(KUBE_REF(&kube_nodes, "ignored", "n1"), &b), "/api/v1/nodes/n1");
	ASSERT_STREQ(path_of(KUBE_REF_SUB(&kube_nodes, NULL, "n1", "status"), &b),
		     "/api/v1/nodes/n1/status");
	ASSERT_STREQ(path_of(KUBE_REF_SUB(&kube_pods, "ns", "p", "eviction"), &b),
		     "/api/v1/namespaces/ns/pods/p/eviction");
	ASSERT_STREQ(path_of(KUBE_REF(&kube_leases, "kube-system", "ccm"), &b),
		     "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/ccm");
	ASSERT_STREQ(path_of(KUBE_REF(&kube_volumeattachments, NULL, "csi-abc"), &b),
		     "/apis/storage.k8s.io/v1/volumeattachments/csi-abc");
	ASSERT_STREQ(path_of(KUBE_REF(&widgets, "a", NULL), &b),
		     "/apis/example.com/v1alpha1/namespaces/a/widgets");
	/* names are path segments: encoded, and never "." or ".." */
	ASSERT_STREQ(path_of(KUBE_REF(&kube_configmaps, "ns", "a/b c"), &b),
		     "/api/v1/namespaces/ns/configmaps/a%2Fb%20c");
	ASSERT_STREQ(path_of(KUBE_REF(&kube_configmaps, "ns", ".."), &b), "<error>");
	ASSERT_STREQ(path_of(KUBE_REF(&kube_configmaps, "", "x"), &b), "<error>");
	ASSERT_STREQ(path_of(KUBE_REF_SUB(&kube_pods, "ns", NULL, "status"), &b), "<error>");
}

TEST(kube_rest_query_selectors)
{
	_cleanup_buf_ struct buf b = BUF_INIT(0);
	struct kube_list_opts lo = {
	    .label_selector = "app=web,tier in (a,b),!canary",
	    .field_selector = "spec.nodeName=ip-10-0-0-1.ec2.internal,status.phase!=Succeeded",
	    .limit = 500,
	    .continue_token = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTB9",
	};

	ASSERT_OK(kube_query(&lo, false, &b));
	ASSERT_STREQ(b.data,
		     "?labelSelector=app%3Dweb%2Ctier%20in%20%28a%2Cb%29%2C%21canary"
		     "&fieldSelector=spec.nodeName%3Dip-10-0-0-1.ec2.internal%2Cstatus.phase"
		     "%21%3DSucceeded&limit=500&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTB9");
	buf_reset(&b);
	struct kube_list_opts w = {.resource_version = "12345",
				   .timeout_seconds = 300,
				   .allow_watch_bookmarks = true,
				   .limit = 10};
	ASSERT_OK(kube_query(&w, true, &b));
	ASSERT_STREQ(
	    b.data,
	    "?resourceVersion=12345&timeoutSeconds=300&allowWatchBookmarks=true&watch=true");
	buf_reset(&b);
	ASSERT_OK(kube_query(NULL, false, &b));
	ASSERT_EQ(b.len, 0);
}

static int status_of(const char *file, long http, struct kube_status *st)
{
	size_t n;
	char *body = test_read_file(test_data(file), &n);
	if (!body)
		return -999;
	int r = kube_status_parse(http, body, n, st);
	free(body);
	return r;
}

TEST(kube_rest_status_errors)
{
	struct kube_status st;

	ASSERT_ERR(status_of("kube/status-404.json", 404, &st), ENOENT);
	ASSERT_STREQ(st.reason, "NotFound");
	ASSERT_STREQ(st.message, "pods \"web-0\" not found");
	ASSERT_EQ(st.code, 404);
	ASSERT_ERR(status_of("kube/status-409-conflict.json", 409, &st), KUBE_ECONFLICT);
	ASSERT_STREQ(st.reason, "Conflict");
	ASSERT_ERR(status_of("kube/status-409-exists.json", 409, &st), EEXIST);
	ASSERT_STREQ(st.reason, "AlreadyExists");
	ASSERT_ERR(status_of("kube/status-410.json", 410, &st), KUBE_EGONE);
	ASSERT_STREQ(st.reason, "Expired");
	memset(&st, 0, sizeof(st));
	ASSERT_ERR(status_of("kube/status-429-eviction.json", 429, &st), EAGAIN);
	ASSERT_EQ(st.code, 429);
	ASSERT_EQ(st.retry_after_ns, 10 * NSEC_PER_SEC);
	ASSERT_CONTAINS(st.message, "disruption budget");
	ASSERT_ERR(status_of("kube/status-403.json", 403, &st), EACCES);
	ASSERT_STREQ(st.reason, "Forbidden");
	/* not a Status: the HTTP code decides, the text is kept */
	ASSERT_ERR(status_of("kube/status-502.html", 502, &st), EAGAIN);
	ASSERT_STREQ(st.reason, "Unknown");
	ASSERT_CONTAINS(st.message, "502 Bad Gateway");
	ASSERT_ERR(kube_status_parse(404, "", 0, &st), ENOENT);
	ASSERT_STREQ(st.reason, "NotFound");
	ASSERT_OK(kube_status_parse(201, "{}", 2, &st));
}

TEST(kube_rest_watch_error_status)
{
	/* a watch ERROR event carries a Status without an HTTP reply */
	cJSON *s = cJSON_Parse("{\"kind\":\"Status\",\"status\":\"Failure\",\"code\":410,"
			       "\"reason\":\"Expired\",\"message\":\"too old resource version\"}");
	struct kube_status st = {0};
	ASSERT_ERR(kube_status_from_json(0, s, &st), KUBE_EGONE);
	ASSERT_EQ(st.http, 410);
	cJSON_Delete(s);
}

TEST(kube_rest_errno_table)
{
	ASSERT_EQ(kube_errno(200, NULL), 0);
	ASSERT_ERR(kube_errno(400, "BadRequest"), EINVAL);
	ASSERT_ERR(kube_errno(401, NULL), EACCES);
	ASSERT_ERR(kube_errno(403, NULL), EACCES);
	ASSERT_ERR(kube_errno(404, NULL), ENOENT);
	ASSERT_ERR(kube_errno(405, NULL), EOPNOTSUPP);
	ASSERT_ERR(kube_errno(409, "AlreadyExists"), EEXIST);
	ASSERT_ERR(kube_errno(409, "Conflict"), KUBE_ECONFLICT);
	ASSERT_ERR(kube_errno(410, NULL), KUBE_EGONE);
	ASSERT_ERR(kube_errno(413, NULL), EMSGSIZE);
	ASSERT_ERR(kube_errno(422, "Invalid"), EINVAL);
	ASSERT_ERR(kube_errno(429, NULL), EAGAIN);
	ASSERT_ERR(kube_errno(500, NULL), EAGAIN);
	ASSERT_ERR(kube_errno(503, NULL), EAGAIN);
	ASSERT_ERR(kube_errno(504, NULL), EAGAIN);
	ASSERT_ERR(kube_errno(418, NULL), EPROTO);
}
