/* A component's manifest with kubeadm patches, written and waited for (cpm_converge.h). */
#include "modules/cpm/cpm_converge.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/cancel.h"
#include "common/base/fileutil.h"
#include "common/base/log.h"
#include "common/kube/yaml.h"
#include "modules/cpm/cpm_files.h"
#include "modules/cpm/cpm_patch.h"
#include "modules/cpm/cpm_wait.h"

#define MANIFEST_MAX ((size_t)1 << 20)
#define REF_FILE_MAX ((size_t)4 << 20)
#define REFS_MAX 512
#define HASHED_MAX ((size_t)64 << 20)
#define NSEC_PER_SEC 1000000000LL

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Deckhouse's checksum: sha256 of the manifest, then of every file it names as
 * "=/etc/kubernetes/..." (sorted, each once; a missing one counts by its name). The input is
 * gathered in one buffer and hashed at once. */
static int manifest_checksum(const char *root, const char *text, char out[65])
{
	char *refs[REFS_MAX] = { 0 };
	size_t n = 0;
	struct buf all = BUF_INIT(HASHED_MAX);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	int r = 0;

	for (const char *p = strstr(text, "=/etc/kubernetes/"); p && r >= 0;
	     p = strstr(p + 1, "=/etc/kubernetes/")) {
		size_t l = strcspn(p + 1, " \t\r\n\"'");
		bool dup = false;
		for (size_t j = 0; j < n && !dup; j++)
			dup = strlen(refs[j]) == l && strncmp(refs[j], p + 1, l) == 0;
		if (dup)
			continue;
		if (n >= REFS_MAX)
			r = -E2BIG;
		else if (!(refs[n] = strndup(p + 1, l)))
			r = -ENOMEM;
		else
			n++;
	}
	qsort(refs, n, sizeof(refs[0]), cmp_str);
	if (r >= 0)
		r = buf_puts(&all, text);
	for (size_t i = 0; i < n; i++) {
		char path[4096], *data = NULL;
		size_t len = 0;
		int rr = r < 0 ? r : cpm_path(root, refs[i], path, sizeof(path));
		if (rr >= 0)
			rr = file_read_all(path, REF_FILE_MAX, &data, &len);
		if (r >= 0 && (rr == -ENOENT || rr == -EISDIR))
			r = buf_puts(&all, refs[i]);
		else if (r >= 0)
			r = rr < 0 ? rr : buf_append(&all, data, len);
		free(data);
		free(refs[i]);
	}
	if (r >= 0 && !EVP_Digest(all.data, all.len, md, &mdlen, EVP_sha256(), NULL))
		r = -EIO;
	buf_release(&all);
	for (unsigned i = 0; r >= 0 && i < 32 && i < mdlen; i++)
		snprintf(&out[i * 2], 3, "%02x", md[i]);
	return r;
}

static cJSON *annotations_of(cJSON *pod, bool create)
{
	cJSON *md = cJSON_GetObjectItemCaseSensitive(pod, "metadata"), *a;

	if (!cJSON_IsObject(md))
		return NULL;
	a = cJSON_GetObjectItemCaseSensitive(md, "annotations");
	if (!cJSON_IsObject(a) && create) {
		cJSON_DeleteItemFromObjectCaseSensitive(md, "annotations");
		a = cJSON_AddObjectToObject(md, "annotations");
	}
	return cJSON_IsObject(a) ? a : NULL;
}

int cpm_component_desired(const struct cpm_config *cfg, const char *root,
			  enum cpm_component_id id, char **ret_text, char ret_sum[65],
			  char *applied, size_t applied_len, char *err, size_t errlen)
{
	const char *name = cpm_component_name(id);
	char *text = NULL, dir[4096], perr[400] = "";
	cJSON *pod = NULL, *ann;
	struct buf b = BUF_INIT(MANIFEST_MAX);
	int r, napplied = 0;

	r = cpm_manifest_render(cfg, root, id, &text, err, errlen);
	if (r < 0)
		return r;
	r = kube_yaml_parse(text, strlen(text), KUBE_YAML_TYPED, &pod, perr, sizeof(perr));
	if (r >= 0 && (r = cpm_path(root, CPM_PATCHES_DIR, dir, sizeof(dir))) >= 0)
		r = napplied = cpm_patches_apply(dir, name, &pod, applied, applied_len, perr,
						 sizeof(perr));
	if (r >= 0 && napplied == 0) {
		/* no patch: the rendered manifest and its checksum as they are */
		const cJSON *s = cJSON_GetObjectItemCaseSensitive(annotations_of(pod, false),
								  CPM_CHECKSUM_ANNOTATION);
		r = cJSON_IsString(s) && strlen(s->valuestring) == 64 ? 0 : -EBADMSG;
		if (r >= 0) {
			memcpy(ret_sum, s->valuestring, 65);
			*ret_text = text;
			text = NULL;
		}
		goto out;
	}
	if (r >= 0 && !cJSON_IsObject(pod))
		r = -EINVAL;
	if (r >= 0) {
		/* the checksum of the patched manifest without its own annotation */
		if ((ann = annotations_of(pod, false)))
			cJSON_DeleteItemFromObjectCaseSensitive(ann, CPM_CHECKSUM_ANNOTATION);
		r = cpm_yaml_write(&b, pod);
	}
	if (r >= 0)
		r = manifest_checksum(root, b.data, ret_sum);
	if (r >= 0) {
		ann = annotations_of(pod, true);
		r = ann && cJSON_AddStringToObject(ann, CPM_CHECKSUM_ANNOTATION, ret_sum) ? 0
											  : -ENOMEM;
	}
	if (r >= 0) {
		buf_reset(&b);
		r = cpm_yaml_write(&b, pod);
	}
	if (r >= 0)
		*ret_text = buf_steal(&b);
out:
	if (r < 0 && !err[0])
		snprintf(err, errlen, "%s: %s", name, perr[0] ? perr : strerror(-r));
	else if (r < 0)
		snprintf(err + strlen(err), errlen - strlen(err), "%s%s", perr[0] ? ": " : "", perr);
	buf_release(&b);
	cJSON_Delete(pod);
	free(text);
	return r < 0 ? r : 0;
}

cJSON *cpm_pod_command(const cJSON *pod)
{
	const cJSON *cs = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(pod, "spec"), "containers");
	cJSON *cmd = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cs, 0), "command");

	return cJSON_IsArray(cmd) ? cmd : NULL;
}

int cpm_force_new_cluster_sum(const char *sum, char ret[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char in[128];

	snprintf(in, sizeof(in), "%s --force-new-cluster", sum);
	if (!EVP_Digest(in, strlen(in), md, &mdlen, EVP_sha256(), NULL) || mdlen < 32)
		return -EIO;
	for (unsigned i = 0; i < 32; i++)
		snprintf(&ret[i * 2], 3, "%02x", md[i]);
	return 0;
}

/* The etcd manifest of a join (--initial-cluster, --initial-cluster-state=existing) or of a
 * --force-new-cluster start (and its checksum, then another); text is replaced. */
static int etcd_edit(const struct cpm_converge *c, char **text, char sum[65], char *err,
		     size_t errlen)
{
	char perr[256] = "", *s = NULL;
	cJSON *pod = NULL, *cmd = NULL, *ann;
	struct buf b = BUF_INIT(MANIFEST_MAX);
	int r = kube_yaml_parse(*text, strlen(*text), KUBE_YAML_TYPED, &pod, perr, sizeof(perr));

	if (r >= 0 && !(cmd = cpm_pod_command(pod)))
		r = -EBADMSG;
	for (int i = r < 0 ? -1 : cJSON_GetArraySize(cmd) - 1; i >= 0; i--) {
		const char *a = cJSON_GetStringValue(cJSON_GetArrayItem(cmd, i));
		if (a && ((c->etcd_initial_cluster && (strncmp(a, "--initial-cluster=", 18) == 0 ||
						       strncmp(a, "--initial-cluster-state=", 24) == 0)) ||
			  strcmp(a, "--force-new-cluster") == 0))
			cJSON_DeleteItemFromArray(cmd, i);
	}
	if (r >= 0 && c->etcd_initial_cluster &&
	    (asprintf(&s, "--initial-cluster=%s", c->etcd_initial_cluster) < 0 ||
	     !cJSON_AddItemToArray(cmd, cJSON_CreateString(s)) ||
	     !cJSON_AddItemToArray(cmd, cJSON_CreateString("--initial-cluster-state=existing"))))
		r = -ENOMEM;
	free(s);
	if (r >= 0 && c->etcd_force_new_cluster) {
		ann = annotations_of(pod, true);
		r = cpm_force_new_cluster_sum(sum, sum);
		if (r >= 0 && (!ann || !cJSON_AddItemToArray(cmd, cJSON_CreateString(
									   "--force-new-cluster"))))
			r = -ENOMEM;
		if (r >= 0) {
			cJSON_DeleteItemFromObjectCaseSensitive(ann, CPM_CHECKSUM_ANNOTATION);
			r = cJSON_AddStringToObject(ann, CPM_CHECKSUM_ANNOTATION, sum) ? 0 : -ENOMEM;
		}
	}
	if (r >= 0)
		r = cpm_yaml_write(&b, pod);
	if (r >= 0) {
		free(*text);
		*text = buf_steal(&b);
	} else {
		snprintf(err, errlen, "etcd: cannot edit the manifest: %s",
			 perr[0] ? perr : strerror(-r));
	}
	buf_release(&b);
	cJSON_Delete(pod);
	return r;
}

/* Moves the manifest out of the kubelet's folder and back (kubernetes#109596). */
static int reread(const struct cpm_converge *c, const char *path)
{
	char hidden[4200], *slash;
	int64_t pause = c->reread_pause_ns ? c->reread_pause_ns : 2 * NSEC_PER_SEC;

	snprintf(hidden, sizeof(hidden), "%s", path);
	slash = strrchr(hidden, '/');
	if (!slash)
		return -EINVAL;
	snprintf(slash + 1, sizeof(hidden) - (size_t)(slash + 1 - hidden), ".%s",
		 strrchr(path, '/') + 1);
	log_warn("trying to make the kubelet re-read the manifest", KV_S("path", path));
	if (rename(path, hidden) < 0)
		return -errno;
	bool stop = cancel_wait(c->ct, pause);
	if (rename(hidden, path) < 0)
		return -errno;
	return stop ? -ECANCELED : 0;
}

int cpm_component_converge(const struct cpm_converge *c, enum cpm_component_id id, char *err,
			   size_t errlen)
{
	const char *name = cpm_component_name(id);
	char abs[128], path[4096], sum[65] = "", applied[512] = "", pod[300], werr[600] = "";
	char *text = NULL, *live = NULL, step[96];
	int64_t t0 = cpm_report_clock_ms();
	enum cpm_step_outcome outcome = CPM_STEP_UNCHANGED;
	int r;

	snprintf(abs, sizeof(abs), "/etc/kubernetes/manifests/%s.yaml", name);
	snprintf(step, sizeof(step), "converge %s", name);
	snprintf(pod, sizeof(pod), "%s-%s", name, c->node_name);
	r = cpm_path(c->root, abs, path, sizeof(path));
	if (r >= 0)
		r = cpm_component_desired(c->cfg, c->root, id, &text, sum, applied, sizeof(applied),
					  err, errlen);
	if (r >= 0 && id == CPM_ETCD && (c->etcd_initial_cluster || c->etcd_force_new_cluster))
		r = etcd_edit(c, &text, sum, err, errlen);
	if (r < 0)
		goto out;
	r = file_read_all(path, MANIFEST_MAX, &live, NULL);
	if (r < 0 && r != -ENOENT) {
		snprintf(err, errlen, "%s: cannot read %s: %s", name, path, strerror(-r));
		goto out;
	}
	if (r < 0 || !strstr(live, sum) ||
	    (id == CPM_ETCD && c->etcd_initial_cluster && strcmp(live, text) != 0)) {
		bool existed = r >= 0;
		log_info("generate new manifest", KV_S("component", name), KV_S("checksum", sum),
			 KV_S("patches", applied));
		if (existed && (r = cpm_backup_file(c->backup, abs)) < 0) {
			snprintf(err, errlen, "%s: cannot back up %s: %s", name, path, strerror(-r));
			goto out;
		}
		r = cpm_write_if_changed(path, text, strlen(text), FILE_MODE_SECRET);
		if (r < 0) {
			snprintf(err, errlen, "%s: cannot write %s: %s", name, path, strerror(-r));
			goto out;
		}
		outcome = existed ? CPM_STEP_UPDATED : CPM_STEP_CREATED;
	} else {
		log_info("manifest checksum is up to date", KV_S("component", name),
			 KV_S("checksum", sum));
	}
	r = cpm_mirror_pod_wait(c->kc, pod, sum, c->pod_tries, c->pod_interval_ns, c->ct, werr,
				sizeof(werr));
	if (r == -ETIMEDOUT && id == CPM_KUBE_APISERVER) {
		log_warn("the mirror pod did not show up", KV_S("pod", pod), KV_S("why", werr));
		r = reread(c, path);
		if (r < 0)
			snprintf(werr, sizeof(werr), "fail to trigger re-read manifest %s: %s", name,
				 strerror(-r));
		else
			r = cpm_mirror_pod_wait(c->kc, pod, sum, c->pod_tries, c->pod_interval_ns,
						c->ct, werr, sizeof(werr));
	}
	if (r < 0)
		snprintf(err, errlen, "component %s did not converge: %s", name, werr);
out:
	if (c->rep)
		cpm_report_add(c->rep, step, r < 0 ? CPM_STEP_FAILED : outcome,
			       cpm_report_clock_ms() - t0, "%s%s%s%s",
			       r < 0 ? err : "checksum ", r < 0 ? "" : sum,
			       applied[0] && r >= 0 ? ", patches " : "", r >= 0 ? applied : "");
	free(text);
	free(live);
	return r;
}
