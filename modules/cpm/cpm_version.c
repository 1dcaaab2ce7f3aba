/* The version-change planner (cpm_version.h): pure, no I/O. */
#include "modules/cpm/cpm_version.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct cpm_vmap_entry cpm_version_map[] = {
    {31, CPM_VMAP_EOL},	      {32, CPM_VMAP_SUPPORTED}, {33, CPM_VMAP_DEFAULT},
    {34, CPM_VMAP_SUPPORTED}, {35, CPM_VMAP_PREVIEW},	{0, CPM_VMAP_UNKNOWN},
};

static const char *const comp_names[] = {"kube-apiserver", "kube-controller-manager",
					 "kube-scheduler", "kubelet"};

const char *cpm_vcomp_name(enum cpm_vcomp c)
{
	return (unsigned)c <= CPM_VC_KUBELET ? comp_names[c] : "?";
}

int cpm_version_parse(const char *s, int *ret_minor)
{
	unsigned long minor, patch;
	char *end;

	if (!s)
		return -EINVAL;
	if (*s == 'v')
		s++;
	if (strncmp(s, "1.", 2) != 0 || s[2] < '0' || s[2] > '9')
		return -EINVAL;
	minor = strtoul(s + 2, &end, 10);
	if (minor > 99 || (end - (s + 2) > 1 && s[2] == '0'))
		return -EINVAL;
	if (*end == '.') {
		const char *p = end + 1;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		patch = strtoul(p, &end, 10);
		if (patch > 9999 || (*end && *end != '-' && *end != '+'))
			return -EINVAL;
	} else if (*end) {
		return -EINVAL;
	}
	*ret_minor = (int)minor;
	return 0;
}

enum cpm_vmap_status cpm_version_status(int minor)
{
	for (const struct cpm_vmap_entry *e = cpm_version_map; e->minor; e++)
		if (e->minor == minor)
			return e->status;
	return CPM_VMAP_UNKNOWN;
}

const char *cpm_vmap_status_name(enum cpm_vmap_status s)
{
	switch (s) {
	case CPM_VMAP_EOL:
		return "end of life";
	case CPM_VMAP_SUPPORTED:
		return "supported";
	case CPM_VMAP_DEFAULT:
		return "default";
	case CPM_VMAP_PREVIEW:
		return "preview";
	default:
		return "not in the version map";
	}
}

int cpm_version_default(void)
{
	for (const struct cpm_vmap_entry *e = cpm_version_map; e->minor; e++)
		if (e->status == CPM_VMAP_DEFAULT)
			return e->minor;
	return 0;
}

static int refuse(struct cpm_vrefusal *why, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(struct cpm_vrefusal *why, const char *rule, const char *fmt, ...)
{
	va_list ap;

	why->rule = rule;
	va_start(ap, fmt);
	vsnprintf(why->why, sizeof(why->why), fmt, ap);
	va_end(ap);
	return -EPERM;
}

/* "1.31..1.35" */
static const char *map_range(char *buf, size_t n)
{
	int lo = cpm_version_map[0].minor, hi = lo;

	for (const struct cpm_vmap_entry *e = cpm_version_map; e->minor; e++)
		hi = e->minor;
	snprintf(buf, n, "1.%d..1.%d", lo, hi);
	return buf;
}

int cpm_version_target(const char *s, int *ret_minor, struct cpm_vrefusal *why)
{
	char range[32];
	int minor;

	if (s && strcmp(s, "Default") == 0) {
		*ret_minor = cpm_version_default();
		return 0;
	}
	if (cpm_version_parse(s, &minor) < 0)
		return -EINVAL;
	switch (cpm_version_status(minor)) {
	case CPM_VMAP_UNKNOWN:
		return refuse(why, CPM_RULE_VERSION_MAP, "1.%d is not in the version map (%s)",
			      minor, map_range(range, sizeof(range)));
	case CPM_VMAP_EOL:
		return refuse(why, CPM_RULE_VERSION_MAP,
			      "1.%d is end of life: a cluster may still run it, but it cannot be "
			      "chosen",
			      minor);
	default:
		*ret_minor = minor;
		return 0;
	}
}

struct span {
	int lo, hi;
	size_t lo_at, hi_at; /* the master holding them */
};

static struct span apiservers(const struct cpm_vstate *s)
{
	struct span a = {1000, -1, 0, 0};

	for (size_t i = 0; i < s->nmasters; i++) {
		int v = s->masters[i].minor[CPM_VC_APISERVER];
		if (v < a.lo) {
			a.lo = v;
			a.lo_at = i;
		}
		if (v > a.hi) {
			a.hi = v;
			a.hi_at = i;
		}
	}
	return a;
}

int cpm_version_check(const struct cpm_vstate *s, struct cpm_vrefusal *why)
{
	struct span a = apiservers(s);

	if (a.hi - a.lo > 1)
		return refuse(
		    why, CPM_RULE_APISERVER_SKEW,
		    "kube-apiserver 1.%d on %s and 1.%d on %s are more than 1 minor apart", a.hi,
		    s->masters[a.hi_at].node, a.lo, s->masters[a.lo_at].node);
	for (size_t i = 0; i < s->nmasters; i++) {
		const struct cpm_vmaster *m = &s->masters[i];
		int api = m->minor[CPM_VC_APISERVER];
		for (int c = CPM_VC_KCM; c < CPM_VC_COUNT; c++) {
			if (m->minor[c] > api)
				return refuse(why, CPM_RULE_CM_SKEW,
					      "%s 1.%d on %s is newer than its kube-apiserver 1.%d",
					      comp_names[c], m->minor[c], m->node, api);
			if (m->minor[c] < api - 1)
				return refuse(why, CPM_RULE_CM_SKEW,
					      "%s 1.%d on %s is more than 1 minor older than its "
					      "kube-apiserver 1.%d",
					      comp_names[c], m->minor[c], m->node, api);
		}
	}
	for (size_t i = 0; i < s->nkubelets; i++) {
		const struct cpm_vkubelet *k = &s->kubelets[i];
		if (k->minor > a.lo)
			return refuse(
			    why, CPM_RULE_KUBELET_SKEW,
			    "the kubelet 1.%d of %s is newer than kube-apiserver 1.%d on %s",
			    k->minor, k->node, a.lo, s->masters[a.lo_at].node);
		if (k->minor < a.hi - 3)
			return refuse(why, CPM_RULE_KUBELET_SKEW,
				      "the kubelet 1.%d of %s is more than 3 minors older than "
				      "kube-apiserver 1.%d on %s",
				      k->minor, k->node, a.hi, s->masters[a.hi_at].node);
	}
	return 0;
}

static int cp_max(const struct cpm_vstate *s)
{
	int v = -1;

	for (size_t i = 0; i < s->nmasters; i++)
		for (int c = 0; c < CPM_VC_COUNT; c++)
			v = s->masters[i].minor[c] > v ? s->masters[i].minor[c] : v;
	return v;
}

static int cp_min(const struct cpm_vstate *s)
{
	int v = 1000;

	for (size_t i = 0; i < s->nmasters; i++)
		for (int c = 0; c < CPM_VC_COUNT; c++)
			v = s->masters[i].minor[c] < v ? s->masters[i].minor[c] : v;
	return v;
}

static int *step_minor(struct cpm_vstate *s, const struct cpm_vstep *st)
{
	return st->comp == CPM_VC_KUBELET ? &s->kubelets[st->index].minor
					  : &s->masters[st->index].minor[st->comp];
}

void cpm_version_apply(struct cpm_vstate *s, const struct cpm_vstep *st)
{
	*step_minor(s, st) = st->to;
	if (st->comp != CPM_VC_KUBELET && st->to > s->max_used)
		s->max_used = st->to;
}

/* A candidate and its place in the order the moves are tried in. */
struct cand {
	struct cpm_vstep st;
	const char *node;
	int key; /* smaller first, then node name, then order */
	int order;
};

static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	int r;

	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	r = strcmp(a->node, b->node);
	if (r)
		return r;
	return a->order - b->order;
}

static void add(struct cand *v, size_t *n, const struct cpm_vstate *s, size_t index,
		enum cpm_vcomp comp, int delta, int key, int order)
{
	struct cand *c = &v[(*n)++];

	c->st.index = index;
	c->st.comp = comp;
	c->st.from =
	    comp == CPM_VC_KUBELET ? s->kubelets[index].minor : s->masters[index].minor[comp];
	c->st.to = c->st.from + delta;
	c->node = comp == CPM_VC_KUBELET ? s->kubelets[index].node : s->masters[index].node;
	c->key = key;
	c->order = order;
}

/* The moves Deckhouse's order allows next (unordered; cand_cmp orders them). */
static size_t candidates(const struct cpm_vstate *s, int target, struct cand *v)
{
	int top = cp_max(s), bottom = cp_min(s);
	bool down = top > target, up = bottom < target;
	size_t n = 0;

	for (size_t i = 0; i < s->nkubelets; i++) {
		down |= s->kubelets[i].minor > target;
		up |= s->kubelets[i].minor < target;
	}
	if (down) {
		/* the minor being left: kubelets first, then kcm and scheduler before their
		 * kube-apiserver, master by master */
		int next = top - 1 > target ? top - 1 : target;
		for (size_t i = 0; i < s->nkubelets; i++)
			if (s->kubelets[i].minor > next)
				add(v, &n, s, i, CPM_VC_KUBELET, -1, -s->kubelets[i].minor, 0);
		for (size_t i = 0; i < s->nmasters; i++)
			for (int c = 0; c < CPM_VC_COUNT; c++)
				if (s->masters[i].minor[c] > next)
					add(v, &n, s, i, (enum cpm_vcomp)c, -1, 1000,
					    c == CPM_VC_APISERVER ? CPM_VC_COUNT : c);
	} else if (up && bottom < top) {
		/* a minor in progress on the control plane: finish it, master by master */
		for (size_t i = 0; i < s->nmasters; i++)
			for (int c = 0; c < CPM_VC_COUNT; c++)
				if (s->masters[i].minor[c] < top)
					add(v, &n, s, i, (enum cpm_vcomp)c, 1, 0, c);
	} else if (up) {
		/* the kubelets to the control plane's minor, oldest first; then the next minor */
		for (size_t i = 0; i < s->nkubelets; i++)
			if (s->kubelets[i].minor < bottom)
				add(v, &n, s, i, CPM_VC_KUBELET, 1, s->kubelets[i].minor, 0);
		if (n == 0)
			for (size_t i = 0; i < s->nmasters; i++)
				for (int c = 0; c < CPM_VC_COUNT; c++)
					add(v, &n, s, i, (enum cpm_vcomp)c, 1, 0, c);
	}
	return n;
}

static int check_shape(const struct cpm_vstate *s)
{
	if (!s || s->nmasters == 0 || s->nmasters > CPM_VERSION_MAX_NODES ||
	    s->nkubelets > CPM_VERSION_MAX_NODES)
		return -EINVAL;
	return 0;
}

int cpm_version_next(const struct cpm_vstate *s, int target, struct cpm_vstep *ret,
		     struct cpm_vrefusal *why)
{
	struct cpm_vstate t;
	struct cand *v;
	size_t n;
	int r = check_shape(s);

	if (r < 0)
		return r;
	v = calloc(s->nmasters * CPM_VC_COUNT + s->nkubelets, sizeof(*v));
	t.masters = malloc(s->nmasters * sizeof(*t.masters));
	t.kubelets = malloc((s->nkubelets + 1) * sizeof(*t.kubelets));
	if (!v || !t.masters || !t.kubelets) {
		r = -ENOMEM;
		goto out;
	}
	n = candidates(s, target, v);
	r = 0;
	for (size_t i = 0; i < n; i++) {
		struct cpm_vrefusal w;
		struct cand tmp;
		size_t best = i;
		int q;
		/* the best of those left (a selection, not a sort: the first one is nearly always
		 * taken, so a step costs O(nodes)) */
		for (size_t j = i + 1; j < n; j++)
			if (cand_cmp(&v[j], &v[best]) < 0)
				best = j;
		tmp = v[i];
		v[i] = v[best];
		v[best] = tmp;
		memcpy(t.masters, s->masters, s->nmasters * sizeof(*t.masters));
		memcpy(t.kubelets, s->kubelets, s->nkubelets * sizeof(*t.kubelets));
		t.nmasters = s->nmasters;
		t.nkubelets = s->nkubelets;
		t.max_used = s->max_used;
		if (cpm_version_status(v[i].st.to) == CPM_VMAP_UNKNOWN) {
			char range[32];
			q = refuse(
			    &w, CPM_RULE_VERSION_MAP,
			    "%s of %s would go to 1.%d, which is not in the version map (%s)",
			    cpm_vcomp_name(v[i].st.comp), v[i].node, v[i].st.to,
			    map_range(range, sizeof(range)));
		} else {
			cpm_version_apply(&t, &v[i].st);
			q = cpm_version_check(&t, &w);
		}
		if (q == 0) {
			*ret = v[i].st;
			r = 1;
			break;
		}
		if (i == 0) { /* the move the order wanted names the rule */
			*why = w;
			r = q;
		}
	}
out:
	free(v);
	free(t.masters);
	free(t.kubelets);
	return r;
}

int cpm_version_plan(struct cpm_vstate *s, int target, struct cpm_vstep **ret, size_t *ret_n,
		     struct cpm_vrefusal *why)
{
	struct cpm_vstate t = {0};
	struct cpm_vstep *steps = NULL;
	size_t n = 0, cap = 0;
	int r = check_shape(s), used;

	if (r < 0)
		return r;
	if ((r = cpm_version_check(s, why)) < 0) {
		snprintf(why->why + strlen(why->why), sizeof(why->why) - strlen(why->why),
			 " (the current state)");
		return r;
	}
	used = s->max_used > cp_max(s) ? s->max_used : cp_max(s);
	if (target < used - 1)
		return refuse(
		    why, CPM_RULE_DOWNGRADE_FLOOR,
		    "1.%d is more than one minor below maxUsedControlPlaneKubernetesVersion "
		    "1.%d: the oldest allowed is 1.%d",
		    target, used, used - 1);
	t.nmasters = s->nmasters;
	t.nkubelets = s->nkubelets;
	t.max_used = used;
	t.masters = malloc(s->nmasters * sizeof(*t.masters));
	t.kubelets = malloc((s->nkubelets + 1) * sizeof(*t.kubelets));
	if (!t.masters || !t.kubelets) {
		r = -ENOMEM;
		goto out;
	}
	memcpy(t.masters, s->masters, s->nmasters * sizeof(*t.masters));
	memcpy(t.kubelets, s->kubelets, s->nkubelets * sizeof(*t.kubelets));
	for (;;) {
		struct cpm_vstep st;
		r = cpm_version_next(&t, target, &st, why);
		if (r <= 0)
			break;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			struct cpm_vstep *p = realloc(steps, nc * sizeof(*p));
			if (!p) {
				r = -ENOMEM;
				break;
			}
			steps = p;
			cap = nc;
		}
		steps[n++] = st;
		cpm_version_apply(&t, &st);
	}
	if (r == 0) {
		memcpy(s->masters, t.masters, s->nmasters * sizeof(*t.masters));
		memcpy(s->kubelets, t.kubelets, s->nkubelets * sizeof(*t.kubelets));
		s->max_used = t.max_used;
		*ret = steps;
		*ret_n = n;
		steps = NULL;
	}
out:
	free(steps);
	free(t.masters);
	free(t.kubelets);
	return r;
}
