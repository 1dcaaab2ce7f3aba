/* cpm_version: Deckhouse's version changes (one minor at a time, control plane before the
 * kubelets on upgrade and after them on downgrade, the downgrade floor, the version map) and
 * upstream's skew policy, table-driven. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "modules/cpm/cpm_version.h"
#include "tests/unit/harness.h"

#define MAXM 3
#define MAXK 4

struct vcase {
	const char *name;
	struct {
		const char *node;
		int api, kcm, sched;
	} m[MAXM];
	struct {
		const char *node;
		int v;
	} k[MAXK];
	int max_used, target;
	/* the steps, "NODE.COMP>TO" joined by spaces (COMP: api kcm sch kl); or the rule */
	const char *want_steps, *want_rule, *want_why;
};

static const char *short_comp(enum cpm_vcomp c)
{
	static const char *const n[] = {"api", "kcm", "sch", "kl"};
	return n[c];
}

/* runs one case; 0 when it gives what the table says */
static int run_case(const struct vcase *c, char *got, size_t n, struct cpm_vrefusal *why)
{
	struct cpm_vmaster m[MAXM];
	struct cpm_vkubelet k[MAXK];
	struct cpm_vstate s = {m, 0, k, 0, c->max_used};
	struct cpm_vstep *steps = NULL;
	size_t ns = 0, off = 0;
	int r;

	for (int i = 0; i < MAXM && c->m[i].node; i++)
		m[s.nmasters++] =
		    (struct cpm_vmaster){c->m[i].node, {c->m[i].api, c->m[i].kcm, c->m[i].sched}};
	for (int i = 0; i < MAXK && c->k[i].node; i++)
		k[s.nkubelets++] = (struct cpm_vkubelet){c->k[i].node, c->k[i].v};
	got[0] = 0;
	r = cpm_version_plan(&s, c->target, &steps, &ns, why);
	for (size_t i = 0; r == 0 && i < ns; i++) {
		const struct cpm_vstep *st = &steps[i];
		const char *node =
		    st->comp == CPM_VC_KUBELET ? k[st->index].node : m[st->index].node;
		off += (size_t)snprintf(got + off, n - off, "%s%s.%s>%d", i ? " " : "", node,
					short_comp(st->comp), st->to);
		/* one minor at a time, always */
		if (abs(st->to - st->from) != 1)
			return -1;
	}
	free(steps);
	if (r == 0) { /* everything ends at the target */
		for (size_t i = 0; i < s.nmasters; i++)
			for (int j = 0; j < CPM_VC_COUNT; j++)
				if (m[i].minor[j] != c->target)
					return -2;
		for (size_t i = 0; i < s.nkubelets; i++)
			if (k[i].minor != c->target)
				return -2;
	}
	return r;
}

static const struct vcase cases[] = {
    {"upgrade across two minors, one at a time, control plane before kubelets",
     {{"m0", 32, 32, 32}, {"m1", 32, 32, 32}},
     {{"m0", 32}, {"w0", 32}},
     0,
     34,
     "m0.api>33 m0.kcm>33 m0.sch>33 m1.api>33 m1.kcm>33 m1.sch>33 m0.kl>33 w0.kl>33 "
     "m0.api>34 m0.kcm>34 m0.sch>34 m1.api>34 m1.kcm>34 m1.sch>34 m0.kl>34 w0.kl>34"},
    {"downgrade one minor: kubelets first, then kcm and scheduler before the apiserver",
     {{"m0", 33, 33, 33}, {"m1", 33, 33, 33}},
     {{"m0", 33}, {"w0", 33}},
     33,
     32,
     "m0.kl>32 w0.kl>32 m0.kcm>32 m0.sch>32 m0.api>32 m1.kcm>32 m1.sch>32 m1.api>32"},
    {"downgrade two minors below maxUsed is refused whole",
     {{"m0", 33, 33, 33}},
     {{"w0", 33}},
     33,
     31,
     NULL,
     CPM_RULE_DOWNGRADE_FLOOR,
     "1.31 is more than one minor below"},
    {"downgrade after an earlier downgrade: maxUsed 1.34 keeps the floor at 1.33",
     {{"m0", 33, 33, 33}},
     {{"w0", 33}},
     34,
     32,
     NULL,
     CPM_RULE_DOWNGRADE_FLOOR,
     "maxUsedControlPlaneKubernetesVersion 1.34"},
    {"a downgrade from a state whose kubelet is newer than an apiserver is refused",
     {{"m0", 34, 34, 34}, {"m1", 33, 33, 33}},
     {{"w0", 34}},
     34,
     33,
     NULL,
     CPM_RULE_KUBELET_SKEW,
     "kubelet 1.34 of w0 is newer than kube-apiserver 1.33"},
    {"a downgrade from apiservers two minors apart is refused",
     {{"m0", 34, 34, 34}, {"m1", 32, 32, 32}},
     {{"w0", 32}},
     34,
     33,
     NULL,
     CPM_RULE_APISERVER_SKEW,
     "more than 1 minor apart"},
    {"a scheduler newer than its apiserver is refused",
     {{"m0", 33, 33, 34}},
     {{"w0", 33}},
     34,
     33,
     NULL,
     CPM_RULE_CM_SKEW,
     "kube-scheduler 1.34 on m0 is newer"},
    {"a controller-manager two minors older is refused",
     {{"m0", 34, 32, 34}},
     {{"w0", 32}},
     34,
     34,
     NULL,
     CPM_RULE_CM_SKEW,
     "kube-controller-manager 1.32 on m0 is more than 1 minor older"},
    {"a kubelet four minors older is refused",
     {{"m0", 35, 35, 35}},
     {{"w0", 31}},
     35,
     35,
     NULL,
     CPM_RULE_KUBELET_SKEW,
     "more than 3 minors older"},
    {"a kubelet three minors older is caught up before the next minor",
     {{"m0", 34, 34, 34}},
     {{"w0", 31}, {"w1", 33}},
     0,
     35,
     "w0.kl>32 w0.kl>33 w0.kl>34 w1.kl>34 m0.api>35 m0.kcm>35 m0.sch>35 w0.kl>35 w1.kl>35"},
    {"an interrupted upgrade is finished first (m1 still on 1.32)",
     {{"m0", 33, 33, 32}, {"m1", 32, 32, 32}},
     {{"w0", 32}},
     33,
     33,
     "m0.sch>33 m1.api>33 m1.kcm>33 m1.sch>33 w0.kl>33"},
    {"an interrupted upgrade is undone: the target below the newest apiserver",
     {{"m0", 33, 33, 33}, {"m1", 32, 32, 32}},
     {{"w0", 32}},
     33,
     32,
     "m0.kcm>32 m0.sch>32 m0.api>32"},
    {"nothing to do", {{"m0", 33, 33, 33}}, {{"w0", 33}}, 33, 33, ""},
    {"from an end-of-life 1.31 to the default",
     {{"m0", 31, 31, 31}},
     {{"w0", 31}},
     0,
     33,
     "m0.api>32 m0.kcm>32 m0.sch>32 w0.kl>32 m0.api>33 m0.kcm>33 m0.sch>33 w0.kl>33"},
    {"to the preview 1.35",
     {{"m0", 34, 34, 34}},
     {{"w0", 34}},
     0,
     35,
     "m0.api>35 m0.kcm>35 m0.sch>35 w0.kl>35"},
    {"through a minor not in the map (1.30) is refused",
     {{"m0", 29, 29, 29}},
     {{"w0", 29}},
     0,
     32,
     NULL,
     CPM_RULE_VERSION_MAP,
     "1.30, which is not in the version map"},
    {"masters upgrade in name order whatever the order given",
     {{"mb", 32, 32, 32}, {"ma", 32, 32, 32}},
     {{"wb", 32}, {"wa", 32}},
     0,
     33,
     "ma.api>33 ma.kcm>33 ma.sch>33 mb.api>33 mb.kcm>33 mb.sch>33 wa.kl>33 wb.kl>33"},
};

TEST(cpm_version_plan_table)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct vcase *c = &cases[i];
		struct cpm_vrefusal why = {0};
		char got[2048];
		int r = run_case(c, got, sizeof(got), &why);

		fprintf(stderr, "  case: %s\n", c->name);
		if (c->want_rule) {
			ASSERT_ERR(r, EPERM);
			ASSERT_STREQ(why.rule, c->want_rule);
			ASSERT_CONTAINS(why.why, c->want_why);
		} else {
			ASSERT_EQ(r, 0);
			ASSERT_STREQ(got, c->want_steps);
		}
	}
}

TEST(cpm_version_next_one_step)
{
	struct cpm_vmaster m[] = {{"m0", {32, 32, 32}}};
	struct cpm_vkubelet k[] = {{"w0", 32}};
	struct cpm_vstate s = {m, 1, k, 1, 0};
	struct cpm_vstep st;
	struct cpm_vrefusal why;

	ASSERT_EQ(cpm_version_next(&s, 33, &st, &why), 1);
	ASSERT_EQ(st.comp, CPM_VC_APISERVER);
	ASSERT_EQ(st.from, 32);
	ASSERT_EQ(st.to, 33);
	ASSERT_EQ(m[0].minor[CPM_VC_APISERVER], 32); /* s untouched */
	cpm_version_apply(&s, &st);
	ASSERT_EQ(s.max_used, 33);
	ASSERT_EQ(cpm_version_next(&s, 32, &st, &why), 1); /* back down: the apiserver last */
	ASSERT_EQ(st.comp, CPM_VC_APISERVER);
	ASSERT_EQ(st.to, 32);
	s.nmasters = 0;
	ASSERT_ERR(cpm_version_next(&s, 33, &st, &why), EINVAL);
}

TEST(cpm_version_map_and_targets)
{
	struct cpm_vrefusal why = {0};
	int v = 0;

	ASSERT_EQ(cpm_version_status(31), CPM_VMAP_EOL);
	ASSERT_EQ(cpm_version_status(32), CPM_VMAP_SUPPORTED);
	ASSERT_EQ(cpm_version_status(33), CPM_VMAP_DEFAULT);
	ASSERT_EQ(cpm_version_status(34), CPM_VMAP_SUPPORTED);
	ASSERT_EQ(cpm_version_status(35), CPM_VMAP_PREVIEW);
	ASSERT_EQ(cpm_version_status(36), CPM_VMAP_UNKNOWN);
	ASSERT_EQ(cpm_version_default(), 33);
	ASSERT_OK(cpm_version_target("Default", &v, &why));
	ASSERT_EQ(v, 33);
	ASSERT_OK(cpm_version_target("1.35", &v, &why));
	ASSERT_EQ(v, 35);
	ASSERT_OK(cpm_version_target("v1.32.7", &v, &why));
	ASSERT_EQ(v, 32);
	ASSERT_ERR(cpm_version_target("1.31", &v, &why), EPERM);
	ASSERT_STREQ(why.rule, CPM_RULE_VERSION_MAP);
	ASSERT_CONTAINS(why.why, "end of life");
	ASSERT_ERR(cpm_version_target("1.36", &v, &why), EPERM);
	ASSERT_STREQ(why.rule, CPM_RULE_VERSION_MAP);
	ASSERT_CONTAINS(why.why, "not in the version map (1.31..1.35)");
	ASSERT_ERR(cpm_version_target("1.30", &v, &why), EPERM);
	ASSERT_ERR(cpm_version_target("default", &v, &why), EINVAL);
	ASSERT_ERR(cpm_version_target("2.1", &v, &why), EINVAL);
}

TEST(cpm_version_parse_forms)
{
	static const struct {
		const char *s;
		int want; /* -1: refused */
	} t[] = {
	    {"1.33", 33},  {"v1.33", 33}, {"1.33.4", 33},  {"v1.33.4", 33}, {"v1.33.4-eks-1", 33},
	    {"v1.9", 9},   {"1.33.", -1}, {"1.033", -1},   {"1.", -1},	    {"2.33", -1},
	    {"1.33x", -1}, {"", -1},	  {"1.33.4x", -1}, {"v1.100", -1},  {"11.3", -1},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int v = -1, r = cpm_version_parse(t[i].s, &v);
		fprintf(stderr, "  \"%s\"\n", t[i].s);
		if (t[i].want < 0) {
			ASSERT_ERR(r, EINVAL);
		} else {
			ASSERT_OK(r);
			ASSERT_EQ(v, t[i].want);
		}
	}
}
