/* Kubeconfig and in-cluster configuration, YAML to JSON. */
#include <stdlib.h>
#include <sys/stat.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/kube/config.h"
#include "common/kube/yaml.h"
#include "tests/unit/harness.h"

static int load_data(const char *name, struct kube_config **ret, char *err, size_t errlen)
{
	struct kube_config_opts o = {.kubeconfig = test_data(name)};
	char path[512];
	str_copy(path, sizeof(path), o.kubeconfig);
	o.kubeconfig = path;
	return kube_config_load(&o, ret, err, errlen);
}

TEST(kube_config_basic_current_context)
{
	_cleanup_kube_config_ struct kube_config *c = NULL;
	char err[512];

	ASSERT_OK(load_data("kube/kubeconfig-basic.yaml", &c, err, sizeof(err)));
	ASSERT_STREQ(c->server, "https://10.0.0.1:6443");
	ASSERT_STREQ(c->context, "admin@prod");
	ASSERT_STREQ(c->namespace, "kube-system");
	ASSERT_CONTAINS(c->ca_pem, "-----BEGIN CERTIFICATE-----\nMIIBfake");
	ASSERT_CONTAINS(c->cert_pem, "MIIBclient");
	ASSERT_CONTAINS(c->key_pem, "PRIVATE KEY");
	ASSERT_NULL(c->token);
	ASSERT_FALSE(c->insecure_skip_verify);
	ASSERT_FALSE(c->in_cluster);
}

TEST(kube_config_other_context_and_master)
{
	_cleanup_kube_config_ struct kube_config *c = NULL;
	char err[512], path[512];

	str_copy(path, sizeof(path), test_data("kube/kubeconfig-basic.yaml"));
	struct kube_config_opts o = {
	    .kubeconfig = path, .context = "staging", .master = "https://override:443/"};
	ASSERT_OK(kube_config_load(&o, &c, err, sizeof(err)));
	ASSERT_STREQ(c->server, "https://override:443");
	ASSERT_STREQ(c->token, "abc.def.ghi");
	ASSERT_TRUE(c->insecure_skip_verify);
	ASSERT_STREQ(c->namespace, "default");
}

TEST(kube_config_relative_files)
{
	_cleanup_kube_config_ struct kube_config *c = NULL;
	char err[512], dir[512], want[600];

	ASSERT_OK(load_data("kube/kubeconfig-files.yaml", &c, err, sizeof(err)));
	str_copy(dir, sizeof(dir), test_data("kube"));
	ASSERT_STREQ(c->server, "https://127.0.0.1:6443");
	snprintf(want, sizeof(want), "%s/pki/ca.crt", dir);
	ASSERT_STREQ(c->ca_file, want);
	ASSERT_STREQ(c->cert_file, "/etc/kubernetes/pki/client.crt");
	snprintf(want, sizeof(want), "%s/pki/client.key", dir);
	ASSERT_STREQ(c->key_file, want);
	ASSERT_STREQ(c->token, "tok-from-file");
}

static void expect_error(const char *file, int e, const char *msg)
{
	struct kube_config *c = NULL;
	char err[512];
	int r = load_data(file, &c, err, sizeof(err));
	if (r != -e) {
		test_fail(__FILE__, __LINE__, "%s: got %d (%s) want -%s", file, r, err,
			  errno_name(e));
		kube_config_free(c);
		return;
	}
	if (!strstr(err, msg))
		test_fail(__FILE__, __LINE__, "%s: error \"%s\" lacks \"%s\"", file, err, msg);
	if (!strstr(err, file))
		test_fail(__FILE__, __LINE__, "%s: error \"%s\" does not name the file", file, err);
}

TEST(kube_config_errors_name_the_field)
{
	expect_error("kube/kubeconfig-bad-base64.yaml", EINVAL,
		     "users[2].user.client-key-data: invalid base64");
	expect_error("kube/kubeconfig-no-server.yaml", EINVAL,
		     "clusters[0].cluster.server: missing");
	expect_error("kube/kubeconfig-exec.yaml", EINVAL,
		     "users[0].user.exec: exec credential plugins are not supported");
	expect_error("kube/kubeconfig-syntax.yaml", EINVAL, "line ");
	expect_error("kube/kubeconfig-cert-no-key.yaml", EINVAL,
		     "users[0].user: client-certificate without client-key");
	expect_error("kube/kubeconfig-wrong-type.yaml", EINVAL,
		     "clusters[0].cluster.server: not a string");
	expect_error("kube/kubeconfig-alias.yaml", EINVAL, "aliases are not supported");
	expect_error("kube/does-not-exist", ENOENT, "No such file");
}

TEST(kube_config_parse_edge_cases)
{
	struct kube_config *c = NULL;
	char err[256];
	static const char no_ctx[] = "clusters: []\n";
	static const char unknown_ctx[] = "current-context: nope\ncontexts: []\n";
	static const char not_map[] = "- a\n- b\n";
	static const char ca_and_insecure[] =
	    "current-context: x\nclusters: [{name: c, cluster: {server: 'https://a', "
	    "certificate-authority: /ca, insecure-skip-tls-verify: 'true'}}]\n"
	    "contexts: [{name: x, context: {cluster: c}}]\n";
	static const char bad_scheme[] =
	    "current-context: x\nclusters: [{name: c, cluster: {server: 'ftp://a'}}]\n"
	    "contexts: [{name: x, context: {cluster: c}}]\n";

	ASSERT_ERR(kube_config_parse(no_ctx, sizeof(no_ctx) - 1, "/k", NULL, &c, err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "current-context is not set");
	ASSERT_ERR(kube_config_parse(unknown_ctx, sizeof(unknown_ctx) - 1, NULL, NULL, &c, err,
				     sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "contexts: no entry named 'nope'");
	ASSERT_ERR(
	    kube_config_parse(not_map, sizeof(not_map) - 1, NULL, NULL, &c, err, sizeof(err)),
	    EINVAL);
	ASSERT_CONTAINS(err, "not a mapping");
	ASSERT_ERR(kube_config_parse("", 0, NULL, NULL, &c, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "empty file");
	ASSERT_ERR(kube_config_parse(ca_and_insecure, sizeof(ca_and_insecure) - 1, NULL, NULL, &c,
				     err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "insecure-skip-tls-verify is not allowed");
	ASSERT_ERR(
	    kube_config_parse(bad_scheme, sizeof(bad_scheme) - 1, NULL, NULL, &c, err, sizeof(err)),
	    EINVAL);
	ASSERT_CONTAINS(err, "unsupported scheme");
	ASSERT_NULL(c);
}

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fputs(text, f);
	fclose(f);
	return 0;
}

TEST(kube_config_in_cluster)
{
	_cleanup_kube_config_ struct kube_config *c = NULL;
	char dir[512], path[600], err[256];

	snprintf(dir, sizeof(dir), "%s/sa", test_tmpdir());
	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/token", dir);
	ASSERT_OK(write_file(path, "sa-token\n"));
	snprintf(path, sizeof(path), "%s/namespace", dir);
	ASSERT_OK(write_file(path, "kube-system"));
	snprintf(path, sizeof(path), "%s/ca.crt", dir);
	ASSERT_OK(write_file(path, "pem"));

	unsetenv("KUBERNETES_SERVICE_HOST");
	ASSERT_ERR(kube_config_in_cluster(dir, &c, err, sizeof(err)), ENOENT);
	ASSERT_CONTAINS(err, "KUBERNETES_SERVICE_HOST");
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	unsetenv("POD_NAMESPACE");
	ASSERT_OK(kube_config_in_cluster(dir, &c, err, sizeof(err)));
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	ASSERT_STREQ(c->server, "https://[fd00::1]:443");
	ASSERT_STREQ(c->token, "sa-token");
	ASSERT_STREQ(c->namespace, "kube-system");
	ASSERT_STREQ(c->ca_file, path);
	ASSERT_TRUE(c->in_cluster);
	ASSERT_NOT_NULL(c->token_file);
}

TEST(kube_config_master_only_and_kubeconfig_env)
{
	_cleanup_kube_config_ struct kube_config *c = NULL, *c2 = NULL;
	struct kube_config_opts o = {.master = "http://127.0.0.1:8080/"};
	char err[256], path[600], list[1300];

	ASSERT_OK(kube_config_load(&o, &c, err, sizeof(err)));
	ASSERT_STREQ(c->server, "http://127.0.0.1:8080");
	ASSERT_NULL(c->token);

	str_copy(path, sizeof(path), test_data("kube/kubeconfig-basic.yaml"));
	snprintf(list, sizeof(list), "/nonexistent/config:%s:/other", path);
	setenv("KUBECONFIG", list, 1);
	struct kube_config_opts none = {0};
	int r = kube_config_load(&none, &c2, err, sizeof(err));
	unsetenv("KUBECONFIG");
	ASSERT_OK(r);
	ASSERT_STREQ(c2->source, path);
}

TEST(kube_base64)
{
	char *out = NULL;
	size_t n;

	ASSERT_OK(kube_base64_decode("aGVsbG8=", 8, &out, &n));
	ASSERT_EQ(n, 5);
	ASSERT_STREQ(out, "hello");
	free(out);
	ASSERT_OK(kube_base64_decode("aGVs\nbG8", 8, &out, &n));
	ASSERT_STREQ(out, "hello");
	free(out);
	ASSERT_ERR(kube_base64_decode("aGVsbG8=x", 9, &out, &n), EINVAL);
	ASSERT_ERR(kube_base64_decode("a", 1, &out, &n), EINVAL);
	ASSERT_ERR(kube_base64_decode("aGVsbG8===", 10, &out, &n), EINVAL);
	ASSERT_ERR(kube_base64_decode("a$==", 4, &out, &n), EINVAL);
}

TEST(kube_yaml_typed_and_untyped)
{
	static const char y[] = "a: 1\nb: true\nc: ~\nd: '1'\ne: [x, 2.5e3, 0x10]\nf: {g: null}\n"
				"h: .inf\n";
	cJSON *v = NULL;
	char err[128];

	ASSERT_OK(kube_yaml_parse(y, sizeof(y) - 1, KUBE_YAML_TYPED, &v, err, sizeof(err)));
	char *s = cJSON_PrintUnformatted(v);
	ASSERT_STREQ(s, "{\"a\":1,\"b\":true,\"c\":null,\"d\":\"1\",\"e\":[\"x\",2500,16],"
			"\"f\":{\"g\":null},\"h\":\".inf\"}");
	free(s);
	cJSON_Delete(v);
	ASSERT_OK(kube_yaml_parse(y, sizeof(y) - 1, 0, &v, err, sizeof(err)));
	s = cJSON_PrintUnformatted(v);
	ASSERT_STREQ(s, "{\"a\":\"1\",\"b\":\"true\",\"c\":null,\"d\":\"1\",\"e\":[\"x\",\"2.5e3\","
			"\"0x10\"],\"f\":{\"g\":null},\"h\":\".inf\"}");
	free(s);
	cJSON_Delete(v);
}

TEST(kube_yaml_refuses)
{
	cJSON *v = NULL;
	char err[128];
	struct buf deep = BUF_INIT(0);

	ASSERT_ERR(kube_yaml_parse("a: 1\na: 2\n", 10, 0, &v, err, sizeof(err)), EBADMSG);
	ASSERT_CONTAINS(err, "duplicate mapping key 'a'");
	ASSERT_ERR(kube_yaml_parse("? [a]\n: 1\n", 10, 0, &v, err, sizeof(err)), EBADMSG);
	ASSERT_CONTAINS(err, "mapping keys must be scalars");
	ASSERT_ERR(kube_yaml_parse("a: \"x\\0y\"\n", 10, 0, &v, err, sizeof(err)), EBADMSG);
	ASSERT_ERR(kube_yaml_parse("", 0, 0, &v, err, sizeof(err)), ENODATA);
	for (int i = 0; i < 100; i++)
		buf_putc(&deep, '[');
	ASSERT_ERR(kube_yaml_parse(deep.data, deep.len, 0, &v, err, sizeof(err)), E2BIG);
	ASSERT_CONTAINS(err, "nested too deeply");
	buf_release(&deep);
	/* only the first document is read */
	ASSERT_OK(kube_yaml_parse("a: 1\n---\nb: [\n", 14, 0, &v, err, sizeof(err)));
	ASSERT_STREQ(json_str(v, "a"), "1");
	cJSON_Delete(v);
}

/* A token that would break the Authorization header is refused when the configuration is
 * loaded, with the file and the field named and the token not shown. */
TEST(kube_config_token_control_characters)
{
	struct kube_config *c = NULL;
	char err[512], path[600], kc[600], text[1400];
	static const char *const bad[] = {"s3cr3t\\r\\nX-Injected: 1", "s3cr3t\\ndef",
					  "s3cr3t\\tdef", "s3cr3t\\x7fdef", "s3cr3t\\x01"};

	snprintf(kc, sizeof(kc), "%s/kubeconfig", test_tmpdir());
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		snprintf(text, sizeof(text),
			 "current-context: x\n"
			 "clusters: [{name: c, cluster: {server: 'https://a'}}]\n"
			 "users: [{name: u, user: {token: \"%s\"}}]\n"
			 "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
			 bad[i]);
		ASSERT_OK(write_file(kc, text));
		struct kube_config_opts o = {.kubeconfig = kc};
		ASSERT_ERR(kube_config_load(&o, &c, err, sizeof(err)), EINVAL);
		ASSERT_CONTAINS(err, kc);
		ASSERT_CONTAINS(err, "users[0].user.token holds a control character");
		ASSERT_NOT_CONTAINS(err, "s3cr3t");
		ASSERT_NULL(c);
		/* and the log's redaction leaves the message readable */
		char red[600];
		ASSERT_STREQ(log_redact(err, red, sizeof(red)), err);
	}

	/* tokenFile: the line break at the end is dropped, one inside is refused */
	snprintf(path, sizeof(path), "%s/token", test_tmpdir());
	snprintf(text, sizeof(text),
		 "current-context: x\n"
		 "clusters: [{name: c, cluster: {server: 'https://a'}}]\n"
		 "users: [{name: u, user: {tokenFile: %s}}]\n"
		 "contexts: [{name: x, context: {cluster: c, user: u}}]\n",
		 path);
	ASSERT_OK(write_file(kc, text));
	struct kube_config_opts o = {.kubeconfig = kc};
	ASSERT_OK(write_file(path, "good-token\r\n"));
	ASSERT_OK(kube_config_load(&o, &c, err, sizeof(err)));
	ASSERT_STREQ(c->token, "good-token");
	kube_config_free(c);
	c = NULL;
	ASSERT_OK(write_file(path, "tok\r\nen\n"));
	ASSERT_ERR(kube_config_load(&o, &c, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, kc);
	ASSERT_CONTAINS(err, "users[0].user.tokenFile '");
	ASSERT_CONTAINS(err, "' holds a token with a control character");
	ASSERT_NOT_CONTAINS(err, "tok\r");
	char red[600];
	ASSERT_STREQ(log_redact(err, red, sizeof(red)), err);
	/* a NUL would cut the token short */
	FILE *f = fopen(path, "w");
	ASSERT_NOT_NULL(f);
	fwrite("tok\0en", 1, 6, f);
	fclose(f);
	ASSERT_ERR(kube_config_load(&o, &c, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "holds a token with a control character");
	ASSERT_NULL(c);

	ASSERT_OK(kube_token_check("eyJhbGciOi.abc-_~+/="));
	ASSERT_ERR(kube_token_check("a\rb"), EBADMSG);
	ASSERT_ERR(kube_token_check("a\nb"), EBADMSG);
}

TEST(kube_config_in_cluster_token_control_characters)
{
	struct kube_config *c = NULL;
	char dir[512], path[600], err[512];

	snprintf(dir, sizeof(dir), "%s/sa", test_tmpdir());
	mkdir(dir, 0700);
	snprintf(path, sizeof(path), "%s/token", dir);
	ASSERT_OK(write_file(path, "sa\ntoken\n"));
	setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	int r = kube_config_in_cluster(dir, &c, err, sizeof(err));
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	ASSERT_ERR(r, EINVAL);
	ASSERT_CONTAINS(err, "in-cluster: the service-account token '");
	ASSERT_CONTAINS(err, "holds a control character");
	ASSERT_NOT_CONTAINS(err, "sa\n");
	char red[600];
	ASSERT_STREQ(log_redact(err, red, sizeof(red)), err);
	ASSERT_NULL(c);
}
