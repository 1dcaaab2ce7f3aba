/* cpm_patch: kubeadm's patch file names, the three patch types on a Pod, the patch folder in
 * name order, and the YAML writer read back by the YAML parser. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/fileutil.h"
#include "common/kube/yaml.h"
#include "modules/cpm/cpm_backup.h"
#include "modules/cpm/cpm_patch.h"
#include "tests/unit/harness.h"

static const char pod_yaml[] = "apiVersion: v1\n"
			       "kind: Pod\n"
			       "metadata:\n"
			       "  name: kube-scheduler\n"
			       "  annotations:\n"
			       "    a: \"1\"\n"
			       "spec:\n"
			       "  containers:\n"
			       "  - name: kube-scheduler\n"
			       "    command:\n"
			       "    - kube-scheduler\n"
			       "    - --bind-address=127.0.0.1\n"
			       "    env:\n"
			       "    - name: A\n"
			       "      value: a\n"
			       "    volumeMounts:\n"
			       "    - mountPath: /etc/kubernetes/scheduler.conf\n"
			       "      name: kubeconfig\n"
			       "  - name: sidecar\n"
			       "    image: x\n"
			       "  hostNetwork: true\n"
			       "  priority: 2000001000\n";

static cJSON *parse(const char *text)
{
	char err[200];
	cJSON *v = NULL;

	if (kube_yaml_parse(text, strlen(text), KUBE_YAML_TYPED, &v, err, sizeof(err)) < 0)
		return NULL;
	return v;
}

static char *yaml(const cJSON *v)
{
	struct buf b = BUF_INIT(1 << 20);

	if (cpm_yaml_write(&b, v) < 0) {
		buf_release(&b);
		return NULL;
	}
	return buf_steal(&b);
}

static int apply(cJSON **pod, enum cpm_patch_type t, const char *patch_text, char *err, size_t n)
{
	cJSON *p = parse(patch_text);
	int r = p ? cpm_patch_apply(pod, t, p, err, n) : -EBADMSG;

	cJSON_Delete(p);
	return r;
}

TEST(cpm_patch_names)
{
	enum cpm_patch_type t = CPM_PATCH_JSON;

	ASSERT_EQ(cpm_patch_name("kube-apiserver.yaml", "kube-apiserver", &t), 1);
	ASSERT_EQ(t, CPM_PATCH_STRATEGIC);
	ASSERT_EQ(cpm_patch_name("kube-apiserver999checksum.yaml", "kube-apiserver", &t), 1);
	ASSERT_EQ(cpm_patch_name("etcd0+merge.json", "etcd", &t), 1);
	ASSERT_EQ(t, CPM_PATCH_MERGE);
	ASSERT_EQ(cpm_patch_name("kube-scheduler+json.yaml", "kube-scheduler", &t), 1);
	ASSERT_EQ(t, CPM_PATCH_JSON);
	ASSERT_EQ(cpm_patch_name("kube-scheduler+strategic.yaml", "kube-scheduler", &t), 1);
	ASSERT_EQ(t, CPM_PATCH_STRATEGIC);
	/* another target, a longer target with the same prefix, bad type or extension */
	ASSERT_EQ(cpm_patch_name("kube-apiserver.yaml", "etcd", &t), 0);
	ASSERT_EQ(cpm_patch_name("kube-controller-manager.yaml", "kube-apiserver", &t), 0);
	ASSERT_EQ(cpm_patch_name("kube-apiserver+foo.yaml", "kube-apiserver", &t), 0);
	ASSERT_EQ(cpm_patch_name("kube-apiserver.yaml.tpl", "kube-apiserver", &t), 0);
	ASSERT_EQ(cpm_patch_name("kube-apiserver.a.yaml", "kube-apiserver", &t), 0);
	ASSERT_EQ(cpm_patch_name("leftover.yaml", "kube-apiserver", &t), 0);
}

TEST(cpm_patch_strategic_merges_containers_by_name)
{
	cJSON *pod = parse(pod_yaml);
	char err[200] = "", *out;

	ASSERT_NOT_NULL(pod);
	ASSERT_OK(apply(&pod, CPM_PATCH_STRATEGIC,
			"metadata:\n  annotations:\n    b: \"2\"\n"
			"spec:\n  containers:\n  - name: kube-scheduler\n    args: [--v=4]\n"
			"    env:\n    - name: B\n      value: b\n    - name: A\n      value: a2\n"
			"  - name: sidecar\n    $patch: delete\n"
			"  - name: new\n    image: y\n"
			"  hostNetwork: null\n",
			err, sizeof(err)));
	out = yaml(pod);
	ASSERT_NOT_NULL(out);
	/* command kept, args added, env merged by name, the annotation added, a field deleted */
	ASSERT_CONTAINS(out, "- --bind-address=127.0.0.1\n");
	ASSERT_CONTAINS(out, "    args:\n    - --v=4\n");
	ASSERT_CONTAINS(out, "    - name: A\n      value: a2\n    - name: B\n      value: b\n");
	ASSERT_CONTAINS(out, "    a: \"1\"\n    b: \"2\"\n");
	ASSERT_NOT_CONTAINS(out, "sidecar");
	ASSERT_NOT_CONTAINS(out, "hostNetwork");
	ASSERT_NOT_CONTAINS(out, "$patch");
	ASSERT_CONTAINS(out, "  - name: new\n    image: \"y\"\n"); /* YAML 1.1 would read y as a bool */
	ASSERT_CONTAINS(out, "  priority: 2000001000\n");
	free(out);
	cJSON_Delete(pod);
}

TEST(cpm_patch_merge_replaces_lists)
{
	cJSON *pod = parse(pod_yaml);
	char err[200] = "", *out;

	ASSERT_OK(apply(&pod, CPM_PATCH_MERGE,
			"{\"spec\":{\"containers\":[{\"name\":\"only\"}],\"dnsPolicy\":\"None\"},"
			"\"metadata\":{\"annotations\":{\"a\":null}}}",
			err, sizeof(err)));
	out = yaml(pod);
	ASSERT_CONTAINS(out, "  containers:\n  - name: only\n");
	ASSERT_NOT_CONTAINS(out, "kube-scheduler\n    command");
	ASSERT_CONTAINS(out, "  dnsPolicy: None\n");
	ASSERT_NOT_CONTAINS(out, "a: \"1\"");
	free(out);
	cJSON_Delete(pod);
}

TEST(cpm_patch_json_ops)
{
	cJSON *pod = parse(pod_yaml);
	char err[200] = "", *out;

	ASSERT_OK(apply(&pod, CPM_PATCH_JSON,
			"[{\"op\":\"add\",\"path\":\"/spec/containers/0/command/-\",\"value\":\"--v=2\"},"
			"{\"op\":\"replace\",\"path\":\"/spec/priority\",\"value\":7},"
			"{\"op\":\"remove\",\"path\":\"/spec/containers/1\"},"
			"{\"op\":\"test\",\"path\":\"/kind\",\"value\":\"Pod\"},"
			"{\"op\":\"copy\",\"from\":\"/metadata/name\",\"path\":\"/metadata/labels\"},"
			"{\"op\":\"move\",\"from\":\"/metadata/labels\",\"path\":\"/metadata/x~1y\"}]",
			err, sizeof(err)));
	out = yaml(pod);
	ASSERT_CONTAINS(out, "    - --bind-address=127.0.0.1\n    - --v=2\n");
	ASSERT_CONTAINS(out, "  priority: 7\n");
	ASSERT_NOT_CONTAINS(out, "sidecar");
	ASSERT_CONTAINS(out, "  x/y: kube-scheduler\n");
	free(out);
	/* a failing test op and a missing path are refused with the operation named */
	ASSERT_ERR(apply(&pod, CPM_PATCH_JSON, "[{\"op\":\"test\",\"path\":\"/kind\",\"value\":\"X\"}]",
			 err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "test failed");
	ASSERT_ERR(apply(&pod, CPM_PATCH_JSON, "[{\"op\":\"remove\",\"path\":\"/spec/nope/a\"}]", err,
			 sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "operation 0 (remove /spec/nope/a)");
	cJSON_Delete(pod);
}

TEST(cpm_patch_yaml_round_trip)
{
	static const char *const tricky[] = { "true", "123", "1.5e3", "a: b", "- x", "#c", "",
					      " lead", "null", "x #y", "0x1F", "-", "{a}",
					      "line\nbreak", "quote\"d", "yes", "~" };
	cJSON *pod = parse(pod_yaml), *back, *ann;
	char *out, key[16];

	ASSERT_NOT_NULL(pod);
	ann = cJSON_GetObjectItem(cJSON_GetObjectItem(pod, "metadata"), "annotations");
	for (size_t i = 0; i < sizeof(tricky) / sizeof(tricky[0]); i++) {
		snprintf(key, sizeof(key), "k%zu", i);
		ASSERT_NOT_NULL(cJSON_AddStringToObject(ann, key, tricky[i]));
	}
	ASSERT_NOT_NULL(cJSON_AddObjectToObject(ann, "empty: map"));
	ASSERT_NOT_NULL(cJSON_AddArrayToObject(cJSON_GetObjectItem(pod, "spec"), "tolerations"));
	out = yaml(pod);
	back = parse(out);
	ASSERT_NOT_NULL(back);
	ASSERT_TRUE(cJSON_Compare(pod, back, true));
	free(out);
	cJSON_Delete(back);
	cJSON_Delete(pod);
}

TEST(cpm_patches_dir_in_name_order)
{
	char dir[] = "/tmp/cpm-patch-XXXXXX", p[300], applied[200], err[300] = "", *out;
	cJSON *pod = parse(pod_yaml);

	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/kube-scheduler.yaml", dir);
	ASSERT_OK(file_write_atomic(p, "spec:\n  dnsPolicy: A\n---\nspec:\n  priority: 1\n", 44,
				    0644));
	snprintf(p, sizeof(p), "%s/kube-scheduler1+merge.yaml", dir);
	ASSERT_OK(file_write_atomic(p, "spec:\n  dnsPolicy: B\n", 21, 0644));
	snprintf(p, sizeof(p), "%s/etcd.yaml", dir);
	ASSERT_OK(file_write_atomic(p, "spec:\n  dnsPolicy: E\n", 21, 0644));
	ASSERT_EQ(cpm_patches_apply(dir, "kube-scheduler", &pod, applied, sizeof(applied), err,
				    sizeof(err)),
		  2);
	ASSERT_STREQ(applied, "kube-scheduler.yaml,kube-scheduler1+merge.yaml");
	out = yaml(pod);
	ASSERT_CONTAINS(out, "  dnsPolicy: B\n");
	ASSERT_CONTAINS(out, "  priority: 1\n");
	free(out);
	/* a broken patch names its file */
	snprintf(p, sizeof(p), "%s/kube-scheduler2+json.yaml", dir);
	ASSERT_OK(file_write_atomic(p, "{}\n", 3, 0644));
	ASSERT_ERR(cpm_patches_apply(dir, "kube-scheduler", &pod, applied, sizeof(applied), err,
				     sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "kube-scheduler2+json.yaml");
	cJSON_Delete(pod);
	ASSERT_OK(cpm_remove_tree(dir));
}
