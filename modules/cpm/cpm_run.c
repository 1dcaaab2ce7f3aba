/* Deckhouse's one-shot control-plane-manager run (cpm_run.h). */
#include "modules/cpm/cpm_run.h"

#include <ctype.h>
#include <stdarg.h>
#include <dirent.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/fileutil.h"
#include "common/base/log.h"
#include "common/http/server.h"
#include "common/kube/kubeflags.h"
#include "common/kube/rest.h"
#include "common/kube/yaml.h"
#include "modules/cpm/cpm_backup.h"
#include "modules/cpm/cpm_converge.h"
#include "modules/cpm/cpm_etcd_converge.h"
#include "modules/cpm/cpm_int.h"
#include "modules/cpm/cpm_shadow.h"
#include "modules/cpm/cpm_wait.h"

#define DECKHOUSE "/etc/kubernetes/deckhouse"
#define KUBEADM_DIR DECKHOUSE "/kubeadm"
#define EXTRA_DIR DECKHOUSE "/extra-files"
#define LAST_APPLIED DECKHOUSE "/last_applied_configuration_checksum"
#define INPUT_MAX ((size_t)4 << 20)
#define BINARY_MAX ((size_t)512 << 20)

char *cpm_run_config_dir, *cpm_run_pki_dir, *cpm_run_healthz_addr;
long long cpm_run_approval_tries, cpm_run_pod_tries;
int64_t cpm_run_approval_interval, cpm_run_pod_interval;
bool cpm_run_etcd_membership;

static atomic_bool converged;

/* What a run shares between its steps. */
struct run {
	const struct cpm_run_opts *o;
	const char *root;
	char node[256];
	char sum[65]; /* the configuration checksum */
	struct cpm_backup backup;
	struct cpm_report rep;
	char err[1024];
};

__attribute__((format(printf, 2, 3))) static int fail(struct run *run, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(run->err, sizeof(run->err), fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- inputs ---------------------------------------------------------------------------------- */

/* Go's os.ExpandEnv, as Deckhouse's installFileIfChanged applies it: $NAME and ${NAME} become
 * the variable's value (empty when unset); a '$' before anything else stays. */
static char *expand_env(const char *s, size_t len)
{
	struct buf b = BUF_INIT(INPUT_MAX * 2);

	for (size_t i = 0; i < len; i++) {
		char name[256];
		size_t n = 0, j = i + 1;
		if (s[i] != '$' || j >= len) {
			buf_putc(&b, s[i]);
			continue;
		}
		if (s[j] == '{') {
			size_t k = j + 1;
			while (k < len && s[k] != '}')
				k++;
			if (k >= len || k - j - 1 >= sizeof(name)) {
				buf_putc(&b, s[i]);
				continue;
			}
			n = k - j - 1;
			memcpy(name, s + j + 1, n);
			j = k + 1;
		} else if (strchr("*#$@!?-", s[j]) || isdigit((unsigned char)s[j])) {
			name[n++] = s[j++];
		} else {
			while (j < len && n + 1 < sizeof(name) &&
			       (isalnum((unsigned char)s[j]) || s[j] == '_'))
				name[n++] = s[j++];
			if (n == 0) {
				buf_putc(&b, s[i]);
				continue;
			}
		}
		name[n] = 0;
		const char *v = n ? getenv(name) : NULL;
		if (v)
			buf_puts(&b, v);
		i = j - 1;
	}
	if (!b.data)
		buf_puts(&b, "");
	return buf_steal(&b);
}

static void hex32(const unsigned char *md, char out[65])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < 32; i++) {
		out[2 * i] = digits[md[i] >> 4];
		out[2 * i + 1] = digits[md[i] & 15];
	}
	out[64] = 0;
}

/* sha256 over the binary and every file of the config folder (sorted, links followed, folders
 * skipped), as Deckhouse's calculateConfigurationChecksum. */
static int config_checksum(const char *dir, char out[65])
{
	struct dirent **list = NULL;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char *data = NULL;
	size_t len = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int n, r = ctx ? 0 : -ENOMEM;

	if (r >= 0 && (r = file_read_all("/proc/self/exe", BINARY_MAX, &data, &len)) >= 0)
		r = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) && EVP_DigestUpdate(ctx, data, len)
			    ? 0
			    : -EIO;
	free(data);
	n = r < 0 ? 0 : scandir(dir, &list, NULL, alphasort);
	if (n < 0)
		r = -errno;
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, list[i]->d_name);
		if (r >= 0 && list[i]->d_name[0] != '.' && stat(path, &st) == 0 &&
		    S_ISREG(st.st_mode)) {
			data = NULL;
			r = file_read_all(path, INPUT_MAX, &data, &len);
			if (r >= 0 && !EVP_DigestUpdate(ctx, data, len))
				r = -EIO;
			free(data);
		}
		free(list[i]);
	}
	free(list);
	if (r >= 0)
		r = EVP_DigestFinal_ex(ctx, md, &mdlen) && mdlen == 32 ? 0 : -EIO;
	EVP_MD_CTX_free(ctx);
	if (r >= 0)
		hex32(md, out);
	return r;
}

/* Deckhouse's installFileIfChanged: src (env expanded when asked) to ROOT+abs, the old one
 * backed up first. 0 unchanged, 1 written, -errno (the run's err says which). */
static int install(struct run *run, const char *src, const char *abs, mode_t mode, bool expand)
{
	char dst[4096], *data = NULL, *text;
	size_t len = 0;
	int64_t t0 = cpm_report_clock_ms();
	struct stat st;
	int r = file_read_all(src, INPUT_MAX, &data, &len);

	if (r < 0)
		return fail(run, "cannot read %s: %s", src, strerror(-r)), r;
	text = expand ? expand_env(data, len) : data;
	if (expand) {
		free(data);
		if (!text)
			return fail(run, "%s: out of memory", src), -ENOMEM;
		len = strlen(text);
	}
	r = cpm_path(run->root, abs, dst, sizeof(dst));
	bool existed = r >= 0 && lstat(dst, &st) == 0;
	if (r >= 0 && existed) {
		char *old = NULL;
		size_t olen = 0;
		bool same = file_read_all(dst, INPUT_MAX, &old, &olen) >= 0 && olen == len &&
			    memcmp(old, text, len) == 0 && (st.st_mode & 07777) == mode;
		free(old);
		if (same) {
			free(text);
			cpm_report_add(&run->rep, abs + 16, CPM_STEP_UNCHANGED,
				       cpm_report_clock_ms() - t0, NULL);
			return 0;
		}
		r = cpm_backup_file(&run->backup, abs);
	}
	if (r >= 0)
		r = cpm_write_if_changed(dst, text, len, mode);
	free(text);
	cpm_report_add(&run->rep, abs + 16,
		       r < 0 ? CPM_STEP_FAILED : existed ? CPM_STEP_UPDATED : CPM_STEP_CREATED,
		       cpm_report_clock_ms() - t0, r < 0 ? "%s" : "from %s",
		       r < 0 ? strerror(-r) : src);
	if (r < 0)
		return fail(run, "cannot install %s as %s: %s", src, dst, strerror(-r)), r;
	return 1;
}

/* Backs up and removes ROOT+abs. */
static int remove_file(struct run *run, const char *abs)
{
	char p[4096];
	int r = cpm_path(run->root, abs, p, sizeof(p));

	if (r >= 0)
		r = cpm_backup_file(&run->backup, abs);
	if (r >= 0 && unlink(p) < 0)
		r = -errno;
	cpm_report_add(&run->rep, abs + 16, r < 0 ? CPM_STEP_FAILED : CPM_STEP_UPDATED, 0,
		       r < 0 ? "cannot remove: %s" : "removed%s", r < 0 ? strerror(-r) : "");
	if (r < 0)
		fail(run, "cannot remove %s: %s", p, strerror(-r));
	return r;
}

/* Removes (with a backup) every file of ROOT+dir_abs that keep() refuses. */
static int remove_others(struct run *run, const char *dir_abs, bool (*keep)(const char *, void *),
			 void *ud)
{
	char dir[4096], abs[4096];
	struct dirent *e;
	DIR *d;
	int r = cpm_path(run->root, dir_abs, dir, sizeof(dir));

	if (r < 0 || !(d = opendir(dir)))
		return r < 0 ? r : errno == ENOENT ? 0 : -errno;
	while (r >= 0 && (e = readdir(d))) {
		struct stat st;
		char p[4400];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (lstat(p, &st) < 0 || !S_ISREG(st.st_mode) || keep(e->d_name, ud))
			continue;
		snprintf(abs, sizeof(abs), "%s/%s", dir_abs, e->d_name);
		r = remove_file(run, abs);
	}
	closedir(d);
	return r;
}

static bool is_component_patch(const char *name, void *ud)
{
	for (int i = 0; i < CPM_COMPONENT_COUNT; i++) {
		char want[64];
		snprintf(want, sizeof(want), "%s.yaml", cpm_component_name(i));
		if (strcmp(name, want) == 0)
			return true;
	}
	return false;
}

static bool in_config_as_extra(const char *name, void *ud)
{
	char p[4096];
	struct stat st;

	snprintf(p, sizeof(p), "%s/extra-file-%s", (const char *)ud, name);
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* ---- checks ------------------------------------------------------------------------------------ */

static const char *arg_value(const cJSON *cmd, const char *flag)
{
	const cJSON *a;
	size_t n = strlen(flag);

	cJSON_ArrayForEach(a, cmd) {
		const char *s = cJSON_GetStringValue(a);
		if (s && strncmp(s, flag, n) == 0 && s[n] == '=')
			return s + n + 1;
	}
	return NULL;
}

/* Deckhouse's checkEtcdManifest: an existing etcd must keep its address, name and data dir. */
static int check_etcd_manifest(struct run *run)
{
	char p[4096], perr[256] = "", *text = NULL;
	cJSON *pod = NULL;
	const cJSON *cmd = NULL;
	int r = cpm_path(run->root, "/etc/kubernetes/manifests/etcd.yaml", p, sizeof(p));

	if (r >= 0 && (r = file_read_all(p, INPUT_MAX, &text, NULL)) == -ENOENT) {
		log_info("no etcd manifest yet, nothing to check", KV_S("path", p));
		return 0;
	}
	if (r >= 0)
		r = kube_yaml_parse(text, strlen(text), 0, &pod, perr, sizeof(perr));
	free(text);
	if (r >= 0) {
		const cJSON *cs = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(pod, "spec"), "containers");
		cmd = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(cs, 0), "command");
	}
	if (r < 0 || !cJSON_IsArray(cmd)) {
		cJSON_Delete(pod);
		return fail(run, "cannot read the etcd manifest %s: %s", p,
			    perr[0] ? perr : r < 0 ? strerror(-r) : "no command");
	}
	const char *adv = arg_value(cmd, "--advertise-client-urls");
	const char *name = arg_value(cmd, "--name"), *dir = arg_value(cmd, "--data-dir");
	char host[300] = "";
	if (adv) {
		const char *h = strstr(adv, "://") ? strstr(adv, "://") + 3 : adv;
		size_t l = strcspn(h, ",");
		const char *colon = memrchr(h, ':', l);
		l = colon ? (size_t)(colon - h) : l;
		if (l > 1 && h[0] == '[' && h[l - 1] == ']')
			h++, l -= 2;
		snprintf(host, sizeof(host), "%.*s", (int)l, h);
	}
	if (!adv || strcmp(host, run->o->my_ip ? run->o->my_ip : "") != 0)
		r = fail(run,
			 "refusing to converge: etcd is not supposed to change advertise address "
			 "from %s to %s (--advertise-client-urls in %s), please verify the node's "
			 "InternalIP (MY_IP)",
			 adv ? host : "(none)", run->o->my_ip ? run->o->my_ip : "(none)", p);
	else if (!name || strcmp(name, run->node) != 0)
		r = fail(run,
			 "refusing to converge: etcd is not supposed to change its name from %s to "
			 "%s (--name in %s), please verify the node name",
			 name ? name : "(none)", run->node, p);
	else if (!dir || strcmp(dir, "/var/lib/etcd") != 0)
		r = fail(run,
			 "refusing to converge: etcd is not supposed to change data-dir from %s to "
			 "/var/lib/etcd (--data-dir in %s), please verify the current --data-dir",
			 dir ? dir : "(none)", p);
	cJSON_Delete(pod);
	return r;
}

/* Deckhouse's checkKubeletConfig: the kubelet must reach the API through the api-proxy. */
static int check_kubelet_config(struct run *run)
{
	char p[4096], perr[256] = "", *text = NULL;
	cJSON *kc = NULL;
	const char *server = NULL;
	int r = cpm_path(run->root, "/etc/kubernetes/kubelet.conf", p, sizeof(p));

	if (r >= 0 && (r = file_read_all(p, INPUT_MAX, &text, NULL)) == -ENOENT)
		return fail(run, "refusing to converge: kubelet config does not exist in %s", p);
	if (r >= 0)
		r = kube_yaml_parse(text, strlen(text), 0, &kc, perr, sizeof(perr));
	free(text);
	if (r >= 0) {
		const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(kc, "clusters"),
						    0);
		server = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(c, "cluster"), "server"));
	}
	if (r < 0)
		r = fail(run, "refusing to converge: cannot read the kubelet config %s: %s", p,
			 perr[0] ? perr : strerror(-r));
	else if (!server || strcmp(server, "https://127.0.0.1:6445") != 0)
		r = fail(run,
			 "refusing to converge: cannot find server: https://127.0.0.1:6445 in kubelet "
			 "config %s (it has %s), kubelet should be configured to access apiserver via "
			 "kube-api-proxy (through https://127.0.0.1:6445), probably node is not "
			 "managed by node-manager",
			 p, server ? server : "no server");
	cJSON_Delete(kc);
	return r;
}

/* ---- steps ------------------------------------------------------------------------------------- */

static int install_kubeadm_config(struct run *run)
{
	const char *cd = cpm_run_config_dir;
	char src[4096], abs[256];
	int r;

	snprintf(src, sizeof(src), "%s/kubeadm-config.yaml", cd);
	if ((r = install(run, src, KUBEADM_DIR "/config.yaml", 0644, true)) < 0)
		return r;
	for (int i = 0; i < CPM_COMPONENT_COUNT; i++) {
		struct stat st;
		const char *name = cpm_component_name(i);
		snprintf(src, sizeof(src), "%s/%s.yaml.tpl", cd, name);
		if (stat(src, &st) < 0)
			continue; /* no patch for this one in the Secret */
		snprintf(abs, sizeof(abs), "%s/%s.yaml", CPM_PATCHES_DIR, name);
		if ((r = install(run, src, abs, 0644, true)) < 0)
			return r;
	}
	return 0;
}

static int install_base_pki(struct run *run)
{
	static const struct {
		const char *src, *dst;
		mode_t mode;
	} files[] = {
		{ "ca.crt", "ca.crt", 0644 },
		{ "ca.key", "ca.key", 0600 },
		{ "front-proxy-ca.crt", "front-proxy-ca.crt", 0644 },
		{ "front-proxy-ca.key", "front-proxy-ca.key", 0600 },
		{ "etcd-ca.crt", "etcd/ca.crt", 0644 },
		{ "etcd-ca.key", "etcd/ca.key", 0600 },
		{ "sa.key", "sa.key", 0600 },
		{ "sa.pub", "sa.pub", 0644 },
	};
	char src[4096], abs[256];
	int r;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(src, sizeof(src), "%s/%s", cpm_run_pki_dir, files[i].src);
		snprintf(abs, sizeof(abs), "/etc/kubernetes/pki/%s", files[i].dst);
		if ((r = install(run, src, abs, files[i].mode, false)) < 0)
			return r;
	}
	return 0;
}

static int install_extra_files(struct run *run)
{
	struct dirent **list = NULL;
	char src[4096], abs[4096];
	int n = scandir(cpm_run_config_dir, &list, NULL, alphasort), r = 0;

	if (n < 0)
		return fail(run, "cannot read %s: %s", cpm_run_config_dir, strerror(errno));
	r = remove_others(run, EXTRA_DIR, in_config_as_extra, cpm_run_config_dir);
	for (int i = 0; i < n; i++) {
		struct stat st;
		const char *name = list[i]->d_name;
		snprintf(src, sizeof(src), "%s/%s", cpm_run_config_dir, name);
		if (r >= 0 && strncmp(name, "extra-file-", 11) == 0 && name[11] &&
		    !strchr(name, '/') && stat(src, &st) == 0 && S_ISREG(st.st_mode)) {
			snprintf(abs, sizeof(abs), "%s/%s", EXTRA_DIR, name + 11);
			r = install(run, src, abs, 0600, true);
		}
		free(list[i]);
	}
	free(list);
	return r < 0 ? r : 0;
}

/* The leaves and kubeconfigs as render makes them, with each file that will be replaced backed
 * up first (a dry run names them). */
static int pki_and_kubeconfigs(struct run *run, const struct cpm_config *cfg)
{
	struct cpm_report dry = { 0 };
	struct cpm_pki_input in;
	int r;

	cpm_config_pki_input(cfg, run->root, &in);
	in.root_kubeconfig_symlink = run->o->root_kubeconfig_symlink;
	r = cpm_pki_converge(&in, true, &dry);
	if (r >= 0)
		r = cpm_sa_converge(&in, true, &dry);
	if (r >= 0)
		r = cpm_kubeconfigs_converge(&in, true, &dry);
	for (size_t i = 0; r >= 0 && i < dry.n; i++) {
		char abs[200];
		if (dry.steps[i].outcome != CPM_STEP_WOULD_CHANGE)
			continue;
		snprintf(abs, sizeof(abs), "/etc/kubernetes/%s", dry.steps[i].name);
		int b = cpm_backup_file(&run->backup, abs);
		if (b < 0 && b != -ENOENT && b != -EINVAL)
			r = b;
	}
	cpm_report_release(&dry);
	if (r >= 0)
		r = cpm_pki_converge(&in, false, &run->rep);
	if (r >= 0)
		r = cpm_sa_converge(&in, false, &run->rep);
	if (r >= 0)
		r = cpm_kubeconfigs_converge(&in, false, &run->rep);
	if (r < 0)
		return fail(run, "certificates and kubeconfigs: %s", strerror(-r));
	return 0;
}

static int check_converged(void *ud, char *why, size_t n)
{
	if (atomic_load(&converged))
		return 0;
	snprintf(why, n, "the control plane is not converged yet");
	return -EAGAIN;
}

/* --dry-run: the manifest written into the shadow root as the converge would (its live copy
 * lacks the checksum), no pod waited for. */
static int component_write(struct run *run, const struct cpm_config *cfg,
			   enum cpm_component_id id, char *err, size_t errlen)
{
	char sum[65], applied[512] = "", path[4096], abs[128], *text = NULL, *live = NULL;
	int r = cpm_component_desired(cfg, run->root, id, &text, sum, applied, sizeof(applied), err,
				      errlen);

	snprintf(abs, sizeof(abs), "/etc/kubernetes/manifests/%s.yaml", cpm_component_name(id));
	if (r >= 0)
		r = cpm_path(run->root, abs, path, sizeof(path));
	if (r >= 0 && !(file_read_all(path, INPUT_MAX, &live, NULL) >= 0 && strstr(live, sum)))
		r = cpm_write_if_changed(path, text, strlen(text), 0600);
	if (r < 0 && !err[0])
		snprintf(err, errlen, "%s: %s", abs, strerror(-r));
	free(text);
	free(live);
	return r < 0 ? r : 0;
}

static int steps(struct run *run, struct kube_client *kc)
{
	char cfgpath[4096], abs[256], err[600] = "";
	struct cpm_config cfg = { 0 };
	int r;

	log_info("phase: remove orphan files", KV_S("dir", CPM_PATCHES_DIR));
	if (remove_others(run, CPM_PATCHES_DIR, is_component_patch, NULL) < 0)
		return -1;
	if (run->o->dry_run)
		goto checks; /* no approval asked for, nothing waited for */
	log_info("phase: approval", KV_S("node", run->node));
	r = cpm_approval_wait(kc, run->node, (int)cpm_run_approval_tries,
			      cpm_run_approval_interval, cancel_root(), err, sizeof(err));
	if (r < 0)
		return fail(run, "approval: %s", r == -ECANCELED ? "stopped" : err);
	if (run->o->pod_name && run->o->pod_name[0]) {
		log_info("phase: waiting for the image-holder containers",
			 KV_S("pod", run->o->pod_name));
		r = cpm_image_holders_wait(kc, run->o->pod_name, (int)cpm_run_approval_tries,
					   cpm_run_approval_interval, cancel_root(), err, sizeof(err));
		if (r < 0)
			return fail(run, "image holders: %s", r == -ECANCELED ? "stopped" : err);
	}
checks:
	if (check_etcd_manifest(run) < 0 || check_kubelet_config(run) < 0)
		return -1;
	log_info("phase: install kubeadm configuration and base PKI");
	if (install_kubeadm_config(run) < 0 || install_base_pki(run) < 0)
		return -1;
	if ((r = cpm_path(run->root, KUBEADM_DIR "/config.yaml", cfgpath, sizeof(cfgpath))) < 0 ||
	    (r = cpm_config_load(cfgpath, run->node, run->o->my_ip, &cfg, err, sizeof(err))) < 0)
		return fail(run, "the configuration %s", err);
	log_info("phase: certificates, kubeconfigs, extra files");
	r = pki_and_kubeconfigs(run, &cfg);
	if (r >= 0)
		r = install_extra_files(run);
	log_info("phase: converge kubernetes components");
	struct cpm_converge c = { .cfg = &cfg,
				  .root = run->root,
				  .backup = &run->backup,
				  .kc = kc,
				  .node_name = run->node,
				  .pod_tries = (int)cpm_run_pod_tries,
				  .pod_interval_ns = cpm_run_pod_interval,
				  .ct = cancel_root(),
				  .rep = &run->rep };
	for (int i = 0; r >= 0 && i < CPM_COMPONENT_COUNT; i++)
		if ((r = run->o->dry_run ? component_write(run, &cfg, i, err, sizeof(err))
			 : i == CPM_ETCD && cpm_run_etcd_membership
				 ? cpm_etcd_converge(&c, err, sizeof(err))
				 : cpm_component_converge(&c, i, err, sizeof(err))) < 0)
			fail(run, "%s", err);
	cpm_config_release(&cfg);
	if (r < 0)
		return -1;
	r = cpm_path(run->root, LAST_APPLIED, abs, sizeof(abs));
	if (r >= 0)
		r = cpm_write_if_changed(abs, run->sum, strlen(run->sum), 0644);
	if (r < 0)
		return fail(run, "cannot write %s: %s", LAST_APPLIED, strerror(-r));
	r = cpm_backup_prune(run->root);
	if (r < 0)
		log_warn("cannot remove old backups", KV_E(r));
	else if (r > 0)
		log_info("removed old backups", KV_I("folders", r), KV_I("kept", CPM_BACKUP_KEEP));
	return 0;
}

/* --dry-run: the steps on a shadow copy, then its differences from ROOT/etc/kubernetes. */
static int run_dry(struct run *run)
{
	char shadow[256];
	int64_t t0 = cpm_report_clock_ms();
	int r = cpm_shadow_make(run->root, shadow, sizeof(shadow)), n;
	const char *real = run->root;

	if (r < 0) {
		fprintf(stderr, "aws-k8s cpm: cannot copy %s/etc/kubernetes for the dry run: %s\n",
			real, strerror(-r));
		return 1;
	}
	run->root = shadow;
	run->backup.root = shadow;
	r = steps(run, NULL);
	if (r < 0) {
		fprintf(stderr, "aws-k8s cpm: converge (dry run) failed: %s\n", run->err);
		cpm_shadow_remove(shadow);
		return 1;
	}
	n = cpm_shadow_diff(real, shadow, stdout);
	cpm_shadow_remove(shadow);
	if (n < 0) {
		fprintf(stderr, "aws-k8s cpm: cannot compare the dry run's files: %s\n", strerror(-n));
		return 1;
	}
	printf("converge (dry run): %d file%s would change (%lld ms); nothing written\n", n,
	       n == 1 ? "" : "s", (long long)(cpm_report_clock_ms() - t0));
	return 0;
}

int cpm_run(const struct cpm_run_opts *o)
{
	struct run run = { .o = o, .root = o->root && o->root[0] ? o->root : "/",
			   .rep = { .live = stdout } };
	struct http_server *srv = NULL;
	struct kube_client *kc = NULL;
	char err[600] = "";
	int64_t t0 = cpm_report_clock_ms();
	int r;

	atomic_store(&converged, false);
	if (o->node_name && o->node_name[0])
		snprintf(run.node, sizeof(run.node), "%s", o->node_name);
	else if (gethostname(run.node, sizeof(run.node)) < 0 || !run.node[0]) {
		fprintf(stderr, "aws-k8s cpm: node name should be set (NODE_NAME or the hostname)\n");
		return 2;
	}
	if (!o->my_ip || !o->my_ip[0]) {
		fprintf(stderr, "aws-k8s cpm: MY_IP env should be set (or --my-ip)\n");
		return 2;
	}
	r = config_checksum(cpm_run_config_dir, run.sum);
	if (r < 0) {
		fprintf(stderr, "aws-k8s cpm: cannot read the configuration folder %s: %s\n",
			cpm_run_config_dir, strerror(-r));
		return 1;
	}
	run.backup = (struct cpm_backup){ .root = run.root, .config_checksum = run.sum };
	if (o->dry_run) {
		run.rep.live = NULL; /* the steps act on the shadow copy: only its diff is shown */
		r = run_dry(&run);
		cpm_report_release(&run.rep);
		return r;
	}
	r = http_server_new(&(struct http_server_opts){ .bind = cpm_run_healthz_addr }, &srv);
	if (r >= 0)
		r = http_server_add_standard(srv);
	if (r >= 0)
		r = http_server_add_check(srv, HTTP_CHECK_READYZ, "converged", check_converged,
					  NULL);
	if (r >= 0)
		r = http_server_start(srv);
	if (r < 0) {
		fprintf(stderr, "aws-k8s cpm: cannot serve /healthz on %s: %s\n",
			cpm_run_healthz_addr, strerror(-r));
		http_server_free(srv);
		return 1;
	}
	r = kube_client_from_flags("cpm", &kc, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "aws-k8s cpm: %s\n", err);
		http_server_free(srv);
		return 1;
	}
	log_info("converge", KV_S("node", run.node), KV_S("configChecksum", run.sum),
		 KV_S("root", run.root));
	r = steps(&run, kc);
	kube_client_free(kc);
	if (r < 0) {
		fprintf(stderr, "aws-k8s cpm: converge failed: %s\n", run.err);
		printf("converge: failed (%lld ms)\n", (long long)(cpm_report_clock_ms() - t0));
		fflush(stdout);
		cpm_report_release(&run.rep);
		http_server_free(srv);
		return 1;
	}
	printf("converge: %zu created, %zu updated, %zu unchanged (%lld ms); waiting for SIGTERM\n",
	       cpm_report_count(&run.rep, CPM_STEP_CREATED),
	       cpm_report_count(&run.rep, CPM_STEP_UPDATED),
	       cpm_report_count(&run.rep, CPM_STEP_UNCHANGED),
	       (long long)(cpm_report_clock_ms() - t0));
	fflush(stdout);
	cpm_report_release(&run.rep);
	atomic_store(&converged, true);
	cancel_wait(cancel_root(), -1);
	log_info("stopping on signal");
	http_server_free(srv);
	return 0;
}
