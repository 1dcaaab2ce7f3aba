/* KubeSchedulerWebhookConfiguration -> kube-scheduler's extenders and profiles (cpm_sched.h). */
#include "modules/cpm/cpm_sched.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/base64.h"
#include "common/base/buf.h"
#include "common/base/fileutil.h"
#include "common/base/json.h"
#include "common/base/textdiff.h"
#include "common/kube/yaml.h"
#include "common/x509/x509.h"
#include "modules/cpm/cpm_files.h"

#define KIND "KubeSchedulerWebhookConfiguration"
#define API_VERSION "deckhouse.io/v1alpha1"
#define MAX_DOCS 256
#define MAX_CRS 256

const char *cpm_sched_api_version(int kube_minor)
{
	return kube_minor >= 29 ? "kubescheduler.config.k8s.io/v1"
				: "kubescheduler.config.k8s.io/v1beta3";
}

/* err: `KubeSchedulerWebhookConfiguration "cr": webhooks[i].field: what` */
static int bad(char *err, size_t n, const char *cr, long i, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static int bad(char *err, size_t n, const char *cr, long i, const char *field, const char *fmt, ...)
{
	char what[200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (i >= 0)
		snprintf(err, n, KIND " \"%s\": webhooks[%ld].%s: %s", cr, i, field, what);
	else
		snprintf(err, n, KIND " \"%s\": %s: %s", cr, field, what);
	return -EINVAL;
}

/* An integer field of o: -ENOENT when missing (null counts as missing), -EINVAL otherwise
 * when not an integer in [lo, hi]. */
static int get_int(const cJSON *o, const char *key, long long lo, long long hi, long long *ret)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!v || cJSON_IsNull(v))
		return -ENOENT;
	if (!cJSON_IsNumber(v) || v->valuedouble != (double)(long long)v->valuedouble ||
	    v->valuedouble < (double)lo || v->valuedouble > (double)hi)
		return -EINVAL;
	*ret = (long long)v->valuedouble;
	return 0;
}

/* A label: lowercase letters, digits and '-', starting (DNS-1035: with a letter) and ending
 * with a letter or digit, at most 63. */
static bool is_label(const char *s, bool letter_first)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || s[n - 1] == '-' || s[0] == '-' ||
	    (letter_first && (s[0] < 'a' || s[0] > 'z')))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

/* The path as Go's url.JoinPath leaves it after a host: "." and empty segments dropped, ".."
 * taking the one before, one leading '/', a trailing '/' kept (so "/" stays "/"); "" stays "". */
static int clean_path(const char *p, struct buf *out)
{
	size_t segs[128], nseg = 0;
	bool trailing = p[0] && p[strlen(p) - 1] == '/';
	int r = 0;

	for (const char *s = p; *s && r >= 0;) {
		const char *e = strchr(s, '/');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if ((n == 1 && s[0] == '.') || n == 0) {
			/* nothing */
		} else if (n == 2 && s[0] == '.' && s[1] == '.') {
			if (nseg > 0)
				out->len = segs[--nseg];
		} else if (nseg < sizeof(segs) / sizeof(segs[0])) {
			segs[nseg++] = out->len;
			r = buf_printf(out, "/%.*s", (int)n, s);
		} else {
			r = -E2BIG;
		}
		s += n + (e != NULL);
	}
	if (r >= 0 && trailing) /* even for "/" alone, as Go does */
		r = buf_putc(out, '/');
	return r;
}

static int ca_is_cert(const char *b64)
{
	struct x509_cert **certs = NULL;
	void *pem = NULL;
	size_t n = 0;
	char e[128];
	int r = base64_decode(b64, strlen(b64), BASE64_SKIP_SPACE, &pem, &n);

	if (r >= 0)
		r = memchr(pem, 0, n) ? -EINVAL : x509_certs_from_pem(pem, &certs, e, sizeof(e));
	x509_certs_free(certs);
	free(pem);
	return r;
}

static int webhook(const char *cr, long i, const cJSON *w, const char *domain,
		   const char *cluster_ca_pem, struct cpm_sched_extender *x, char *err, size_t n)
{
	const cJSON *cc = cJSON_GetObjectItemCaseSensitive(w, "clientConfig");
	const cJSON *svc = cc ? cJSON_GetObjectItemCaseSensitive(cc, "service") : NULL;
	const char *fp = json_str(w, "failurePolicy"), *sn, *ns, *path, *ca;
	struct buf url = BUF_INIT(4096);
	long long port = 0;
	int r;

	if (!cJSON_IsObject(w))
		return bad(err, n, cr, -1, "webhooks", "each entry must be an object");
	r = get_int(w, "weight", 1, 1LL << 31, &x->weight);
	if (r == -ENOENT)
		return bad(err, n, cr, i, "weight", "required");
	if (r < 0)
		return bad(err, n, cr, i, "weight", "must be an integer of at least 1");
	if (cJSON_GetObjectItemCaseSensitive(w, "failurePolicy") &&
	    !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(w, "failurePolicy")) &&
	    (!fp || (strcmp(fp, "Fail") != 0 && strcmp(fp, "Ignore") != 0)))
		return bad(err, n, cr, i, "failurePolicy", "must be Fail or Ignore (got \"%s\")",
			   fp ? fp : "not a string");
	x->ignorable = fp && strcmp(fp, "Ignore") == 0;
	r = get_int(w, "timeoutSeconds", 0, 3600, &x->timeout_s);
	if (r == -ENOENT)
		x->timeout_s = 5;
	else if (r < 0)
		return bad(err, n, cr, i, "timeoutSeconds", "must be an integer from 0 to 3600");
	if (!cJSON_IsObject(cc))
		return bad(err, n, cr, i, "clientConfig", "required");
	if (!cJSON_IsObject(svc))
		return bad(err, n, cr, i, "clientConfig.service", "required");
	sn = json_str(svc, "name");
	ns = json_str(svc, "namespace");
	path = json_str(svc, "path");
	ca = json_str(cc, "caBundle");
	if (!sn)
		return bad(err, n, cr, i, "clientConfig.service.name", "required (a string)");
	if (!is_label(sn, true))
		return bad(err, n, cr, i, "clientConfig.service.name",
			   "\"%s\" is not a Service name (a DNS-1035 label)", sn);
	if (!ns)
		return bad(err, n, cr, i, "clientConfig.service.namespace", "required (a string)");
	if (!is_label(ns, false))
		return bad(err, n, cr, i, "clientConfig.service.namespace",
			   "\"%s\" is not a namespace name (a DNS-1123 label)", ns);
	r = get_int(svc, "port", 1, 65535, &port);
	if (r == -ENOENT)
		return bad(err, n, cr, i, "clientConfig.service.port", "required");
	if (r < 0)
		return bad(err, n, cr, i, "clientConfig.service.port",
			   "must be an integer from 1 to 65535");
	if (!path)
		return bad(err, n, cr, i, "clientConfig.service.path", "required (a string)");
	if (strlen(path) > 1024 || strpbrk(path, " \t\r\n?#\"\\"))
		return bad(err, n, cr, i, "clientConfig.service.path",
			   "\"%.64s\" is not a URL path (no spaces, '?', '#', quotes or "
			   "backslashes; at most 1024)",
			   path);
	if (!ca)
		return bad(err, n, cr, i, "clientConfig.caBundle", "required (a string)");
	r = buf_printf(&url, "https://%s.%s.svc.%s:%lld", sn, ns, domain, port);
	if (r >= 0)
		r = clean_path(path, &url);
	if (r < 0) {
		buf_release(&url);
		return r == -E2BIG
			   ? bad(err, n, cr, i, "clientConfig.service.path", "too many segments")
			   : r;
	}
	x->url_prefix = buf_steal(&url);
	x->ca_fallback = ca_is_cert(ca) < 0;
	if (x->ca_fallback && !cluster_ca_pem)
		return bad(err, n, cr, i, "clientConfig.caBundle",
			   "not base64 of a PEM certificate, and no cluster CA to fall back to");
	if (x->ca_fallback)
		r = base64_encode(cluster_ca_pem, strlen(cluster_ca_pem), BASE64_STD, &x->ca_data);
	else
		x->ca_data = strdup(ca);
	if (r < 0 || !x->ca_data)
		return -ENOMEM;
	x->index = (size_t)i;
	return (x->cr = strdup(cr)) ? 0 : -ENOMEM;
}

struct crs {
	const cJSON *v[MAX_CRS];
	size_t n;
};

static int add_cr(struct crs *c, const cJSON *o, char *err, size_t n)
{
	const char *av = json_str(o, "apiVersion"), *kind = json_str(o, "kind");

	if (!cJSON_IsObject(o)) {
		snprintf(err, n, "each item must be a %s object", KIND);
		return -EINVAL;
	}
	if (kind && (strcmp(kind, "List") == 0 || strcmp(kind, KIND "List") == 0)) {
		const cJSON *items = cJSON_GetObjectItemCaseSensitive(o, "items"), *it;
		if (items && !cJSON_IsArray(items) && !cJSON_IsNull(items)) {
			snprintf(err, n, "%s: items must be a list", kind);
			return -EINVAL;
		}
		cJSON_ArrayForEach(it, items)
		{
			int r = add_cr(c, it, err, n);
			if (r < 0)
				return r;
		}
		return 0;
	}
	if (!kind || strcmp(kind, KIND) != 0 || !av || strcmp(av, API_VERSION) != 0) {
		snprintf(err, n, "an object of kind \"%s\" apiVersion \"%s\": only %s %s is taken",
			 kind ? kind : "", av ? av : "", API_VERSION, KIND);
		return -EINVAL;
	}
	if (c->n >= MAX_CRS) {
		snprintf(err, n, "more than %d %s objects", MAX_CRS, KIND);
		return -E2BIG;
	}
	c->v[c->n++] = o;
	return 0;
}

static int cr_cmp(const void *a, const void *b)
{
	const char *x = json_str(*(const cJSON *const *)a, "metadata.name");
	const char *y = json_str(*(const cJSON *const *)b, "metadata.name");

	return strcmp(x ? x : "", y ? y : "");
}

static int extenders(struct crs *c, const char *domain, const char *ca_pem,
		     struct cpm_sched_extenders *e, char *err, size_t n)
{
	qsort(c->v, c->n, sizeof(c->v[0]), cr_cmp);
	for (size_t k = 0; k < c->n; k++) {
		const char *name = json_str(c->v[k], "metadata.name");
		const cJSON *hooks = cJSON_GetObjectItemCaseSensitive(c->v[k], "webhooks"), *w;
		long i = 0;
		if (!name || !name[0]) {
			snprintf(err, n, KIND ": metadata.name: required");
			return -EINVAL;
		}
		if (k > 0 && strcmp(name, json_str(c->v[k - 1], "metadata.name")) == 0)
			return bad(err, n, name, -1, "metadata.name", "given twice");
		if (!hooks || cJSON_IsNull(hooks))
			return bad(err, n, name, -1, "webhooks", "required");
		if (!cJSON_IsArray(hooks))
			return bad(err, n, name, -1, "webhooks", "must be a list");
		cJSON_ArrayForEach(w, hooks)
		{
			struct cpm_sched_extender *x;
			int r;
			if (e->n >= CPM_SCHED_MAX_EXTENDERS) {
				snprintf(err, n, "more than %d webhooks in all",
					 CPM_SCHED_MAX_EXTENDERS);
				return -E2BIG;
			}
			x = realloc(e->v, (e->n + 1) * sizeof(*x));
			if (!x)
				return -ENOMEM;
			e->v = x;
			x = &e->v[e->n++];
			memset(x, 0, sizeof(*x));
			r = webhook(name, i++, w, domain, ca_pem, x, err, n);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

/* The next document from *p: [doc, *doc_end), *p moved past its "---" line. */
static const char *next_document(const char **p, const char *end, const char **doc_end)
{
	const char *doc = *p, *q = doc;

	while ((q = memmem(q, (size_t)(end - q), "---", 3)) != NULL) {
		bool at_line = q == doc || q[-1] == '\n';
		const char *after = q + 3;
		if (at_line && (after == end || *after == '\n' || *after == '\r' || *after == ' '))
			break;
		q = after;
	}
	*doc_end = q ? q : end;
	if (!q) {
		*p = end;
	} else {
		const char *nl = memchr(q, '\n', (size_t)(end - q));
		*p = nl ? nl + 1 : end;
	}
	return doc;
}

int cpm_sched_parse(const char *text, size_t len, const char *cluster_domain,
		    const char *cluster_ca_pem, struct cpm_sched_extenders *ret, char *err,
		    size_t errlen)
{
	cJSON *docs[MAX_DOCS];
	struct crs *c = calloc(1, sizeof(*c));
	struct cpm_sched_extenders e = {0};
	const char *p = text, *end = text + len;
	size_t nd = 0;
	int r = c ? 0 : -ENOMEM;

	err[0] = 0;
	while (r >= 0 && p < end) {
		const char *de, *d = next_document(&p, end, &de);
		char ye[160] = "";
		cJSON *j = NULL;
		if (nd >= MAX_DOCS) {
			snprintf(err, errlen, "more than %d YAML documents", MAX_DOCS);
			r = -E2BIG;
			break;
		}
		r = kube_yaml_parse(d, (size_t)(de - d), KUBE_YAML_TYPED, &j, ye, sizeof(ye));
		if (r == -ENODATA) {
			r = 0;
			continue;
		}
		if (r < 0) {
			snprintf(err, errlen, "document %zu: %s", nd + 1, ye);
			r = -EINVAL;
			break;
		}
		docs[nd++] = j;
		if (cJSON_IsArray(j)) {
			const cJSON *it;
			cJSON_ArrayForEach(it, j)
			{
				if ((r = add_cr(c, it, err, errlen)) < 0)
					break;
			}
		} else if (!cJSON_IsNull(j)) {
			r = add_cr(c, j, err, errlen);
		}
	}
	if (r >= 0)
		r = extenders(
		    c, cluster_domain && cluster_domain[0] ? cluster_domain : "cluster.local",
		    cluster_ca_pem, &e, err, errlen);
	for (size_t i = 0; i < nd; i++)
		cJSON_Delete(docs[i]);
	free(c);
	if (r < 0) {
		if (!err[0])
			snprintf(err, errlen, "%s", strerror(-r));
		cpm_sched_extenders_release(&e);
		return r;
	}
	*ret = e;
	return 0;
}

int cpm_sched_load(const char *path, const char *cluster_domain, const char *cluster_ca_pem,
		   struct cpm_sched_extenders *ret, char *err, size_t errlen)
{
	char *text = NULL, e[400] = "";
	size_t len = 0;
	int r = file_read_all(path, CPM_SCHED_MAX_FILE, &text, &len);

	if (r < 0) {
		snprintf(err, errlen, "cannot read \"%s\": %s", path, strerror(-r));
		return r;
	}
	r = cpm_sched_parse(text, len, cluster_domain, cluster_ca_pem, ret, e, sizeof(e));
	free(text);
	if (r < 0)
		snprintf(err, errlen, "\"%s\": %s", path, e);
	return r;
}

void cpm_sched_extenders_release(struct cpm_sched_extenders *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++) {
		free(e->v[i].cr);
		free(e->v[i].url_prefix);
		free(e->v[i].ca_data);
	}
	free(e->v);
	e->v = NULL;
	e->n = 0;
}

static const char profiles[] = "kind: KubeSchedulerConfiguration\n"
			       "clientConnection:\n"
			       "  kubeconfig: /etc/kubernetes/scheduler.conf\n"
			       "profiles:\n"
			       "- schedulerName: high-node-utilization\n"
			       "  pluginConfig:\n"
			       "  - name: NodeResourcesFit\n"
			       "    args:\n"
			       "      scoringStrategy:\n"
			       "        type: MostAllocated\n"
			       "        resources:\n"
			       "        - name: cpu\n"
			       "          weight: 1\n"
			       "        - name: memory\n"
			       "          weight: 1\n"
			       "- schedulerName: default-scheduler\n"
			       "  pluginConfig:\n"
			       "  - name: PodTopologySpread\n"
			       "    args:\n"
			       "      defaultingType: List\n"
			       "      defaultConstraints:\n"
			       "      - maxSkew: 1\n"
			       "        topologyKey: topology.kubernetes.io/zone\n"
			       "        whenUnsatisfiable: ScheduleAnyway\n";

/* s as a YAML double-quoted scalar (JSON's string syntax is one). */
static int put_quoted(struct buf *b, const char *s)
{
	cJSON *v = cJSON_CreateString(s);
	char *q = v ? cJSON_PrintUnformatted(v) : NULL;
	int r = q ? buf_puts(b, q) : -ENOMEM;

	cJSON_free(q);
	cJSON_Delete(v);
	return r;
}

int cpm_sched_render(int kube_minor, const struct cpm_sched_extenders *e, char **ret)
{
	struct buf b = BUF_INIT(CPM_SCHED_MAX_FILE);
	int r = buf_printf(&b, "apiVersion: %s\n%s", cpm_sched_api_version(kube_minor), profiles);

	if (r >= 0 && e && e->n > 0)
		r = buf_puts(&b, "extenders:\n");
	for (size_t i = 0; r >= 0 && e && i < e->n; i++) {
		const struct cpm_sched_extender *x = &e->v[i];
		r = buf_puts(&b, "- urlPrefix: ");
		if (r >= 0)
			r = put_quoted(&b, x->url_prefix);
		if (r >= 0)
			r = buf_printf(&b,
				       "\n  filterVerb: filter\n"
				       "  prioritizeVerb: prioritize\n"
				       "  weight: %lld\n"
				       "  enableHTTPS: true\n"
				       "  httpTimeout: %llds\n"
				       "  nodeCacheCapable: true\n"
				       "  ignorable: %s\n"
				       "  tlsConfig:\n"
				       "    caData: ",
				       x->weight, x->timeout_s, x->ignorable ? "true" : "false");
		if (r >= 0)
			r = put_quoted(&b, x->ca_data);
		if (r >= 0)
			r = buf_putc(&b, '\n');
	}
	if (r < 0) {
		buf_release(&b);
		return r;
	}
	*ret = buf_steal(&b);
	return *ret ? 0 : -ENOMEM;
}

int cpm_sched_write(const char *root, const char *text, bool dry_run, const char *detail,
		    struct cpm_report *rep)
{
	int64_t t0 = cpm_report_clock_ms();
	const char *step = "extra-files/scheduler-config.yaml";
	char path[4096], *old = NULL;
	bool existed, same;
	int r = cpm_path(root, CPM_SCHED_CONFIG_PATH, path, sizeof(path));

	if (r < 0) {
		cpm_report_add(rep, step, CPM_STEP_FAILED, 0, "%s", strerror(-r));
		return r;
	}
	existed = file_read_all(path, CPM_SCHED_MAX_FILE, &old, NULL) >= 0;
	same = existed && strcmp(old, text) == 0;
	if (dry_run && !same) { /* what would change, as the manifests show it */
		struct buf d = BUF_INIT(0);
		int q = text_diff(existed ? old : "", text,
				  existed ? "a" CPM_SCHED_CONFIG_PATH : "/dev/null",
				  "b" CPM_SCHED_CONFIG_PATH, 3, &d);
		if (q == 1)
			fwrite(d.data, 1, d.len, stdout);
		else if (q < 0)
			printf("%s: cannot show the difference: %s\n", CPM_SCHED_CONFIG_PATH,
			       strerror(-q));
		buf_release(&d);
	}
	free(old);
	if (dry_run) {
		cpm_report_add(rep, step, same ? CPM_STEP_UNCHANGED : CPM_STEP_WOULD_CHANGE,
			       cpm_report_clock_ms() - t0, "%s%s%s",
			       same	 ? ""
			       : existed ? "would replace"
					 : "would create",
			       detail && !same ? "; " : "", detail ? detail : "");
		return !same;
	}
	r = cpm_write_if_changed(path, text, strlen(text), FILE_MODE_SECRET);
	if (r < 0)
		cpm_report_add(rep, step, CPM_STEP_FAILED, cpm_report_clock_ms() - t0,
			       "cannot write %s: %s", path, strerror(-r));
	else
		cpm_report_add(rep, step,
			       r == 0	 ? CPM_STEP_UNCHANGED
			       : existed ? CPM_STEP_UPDATED
					 : CPM_STEP_CREATED,
			       cpm_report_clock_ms() - t0, detail ? "%s" : NULL, detail);
	return r;
}
