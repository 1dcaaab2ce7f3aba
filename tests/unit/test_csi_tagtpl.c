/* Tag templates (csi_controller_tagtpl.c): upstream's own cases (pkg/util/template/
 * template_test.go and docs/tagging.md of aws-ebs-csi-driver v1.64), then what Go's
 * text/template does at the edges, the parts we refuse, and the caps. */
#include <stdlib.h>
#include <string.h>

#include "modules/csi-controller/csi_controller_internal.h"
#include "modules/csi-controller/csi_controller_tagtpl.h"
#include "tests/unit/harness.h"

#define KV(k, v)                                                                                   \
	{                                                                                          \
		(char *)(k), (char *)(v)                                                           \
	}

struct tcase {
	const char *in;
	const char *a, *b, *c; /* the three fields (PVCName, PVCNamespace, PVName) */
	const char *want;      /* NULL: an error containing err */
	const char *err;
};

/* Runs the cases over props of the given type; the number of failures is reported per case. */
static void run_cases(const struct tcase *cases, size_t n, const char *const *fields,
		      const char *type)
{
	for (size_t i = 0; i < n; i++) {
		const char *values[3] = {cases[i].a, cases[i].b, cases[i].c};
		const struct csi_tagtpl_props props = {type, fields, values, 3};
		char err[256] = "", *out = NULL;
		int r = csi_tagtpl_eval(cases[i].in, &props, &out, err, sizeof(err));

		if (cases[i].want && (r < 0 || strcmp(out, cases[i].want) != 0))
			test_fail(__FILE__, __LINE__,
				  "case %zu %s: got %d \"%s\" (%s), want \"%s\"", i, cases[i].in, r,
				  out ? out : "", err, cases[i].want);
		if (!cases[i].want && (r != -EINVAL || !strstr(err, cases[i].err)))
			test_fail(__FILE__, __LINE__,
				  "case %zu %s: got %d \"%s\", want an error \"%s\"", i,
				  cases[i].in, r, r < 0 ? err : out, cases[i].err);
		free(out);
	}
}

#define PV(...)                                                                                    \
	run_cases((const struct tcase[]){__VA_ARGS__},                                             \
		  sizeof((const struct tcase[]){__VA_ARGS__}) / sizeof(struct tcase),              \
		  csi_tagtpl_pv_fields, CSI_TAGTPL_PV_TYPE)

/* upstream's TestEvaluate and the examples of docs/tagging.md */
TEST(csi_tagtpl_upstream_volume_cases)
{
	PV({"value1", NULL, NULL, NULL, "value1", NULL},
	   {"hello world", NULL, NULL, NULL, "hello world", NULL}, {"", NULL, NULL, NULL, "", NULL},
	   {"{{ .PVCName }}", "ebs-claim", "default", "ebs-claim-012345", "ebs-claim", NULL},
	   {"{{ .PVCNamespace }}", "ebs-claim", "default", "ebs-claim-012345", "default", NULL},
	   {"{{ .PVName }}", "ebs-claim", "default", "ebs-claim-012345", "ebs-claim-012345", NULL},
	   {"{{ .PVCName }", NULL, NULL, NULL, NULL, "unexpected \"}\" in operand"},
	   {"{{ .PVCNamespace | html }}", NULL, "ns-prod", NULL, NULL,
	    "error calling html: cannot call 'html' function"},
	   {"{{ .PVCNamespace | js }}", NULL, "ns-prod", NULL, NULL, "cannot call 'js'"},
	   {"{{ .PVCNamespace | call }}", NULL, "ns-prod", NULL, NULL, "cannot call 'call'"},
	   {"{{ .PVCNamespace | urlquery }}", NULL, "ns-prod", NULL, NULL,
	    "cannot call 'urlquery'"},
	   {"{{ .PVCNamespace | contains \"prod\" }}", NULL, "ns-prod", NULL, "true", NULL},
	   {"{{ .PVCNamespace | toUpper }}", NULL, "ns-prod", NULL, "NS-PROD", NULL},
	   {"{{ .PVCNamespace | toLower }}", NULL, "ns-PROD", NULL, "ns-prod", NULL},
	   {"{{ .PVCNamespace | field \"-\" 1 }}", NULL, "ns-prod-default", NULL, "prod", NULL},
	   {"{{ .PVCNamespace | substring 0 4 }}", NULL, "prod-12345", NULL, "prod", NULL},
	   /* no --extra-create-metadata: the names are empty */
	   {"{{ .PVCNamespace }}", NULL, NULL, NULL, "", NULL},
	   {"{{ .PVCNamespace | field \"-\" 1 }}", NULL, NULL, NULL, NULL,
	    "extractWord: cannot index into split string; index = 1, length = 1"},
	   {"{{ .PVCNamespace | field \"-\" 2 | toUpper }}", NULL, "ns-prod-abcdef", NULL, "ABCDEF",
	    NULL}, );
}

/* upstream's TestEvaluateVolumeSnapshotTemplate */
TEST(csi_tagtpl_upstream_snapshot_cases)
{
	const struct tcase cases[] = {
	    {"{{ .VolumeSnapshotName }}", "ebs-vs", "default", "ebs-vs-content-012345", "ebs-vs"},
	    {"{{ .VolumeSnapshotNamespace }}", "ebs-vs", "default", NULL, "default"},
	    {"{{ .VolumeSnapshotContentName }}", "ebs-vs", "default", "ebs-vs-content-012345",
	     "ebs-vs-content-012345"},
	    {"{{ .VolumeSnapshotName }", NULL, NULL, NULL, NULL, "unexpected \"}\" in operand"},
	    {"{{ .VolumeSnapshotNamespace | html }}", NULL, "ns-prod", NULL, NULL, "cannot call"},
	    {"{{ .VolumeSnapshotNamespace | contains \"prod\" }}", NULL, "ns-prod", NULL, "true"},
	    {"{{ .VolumeSnapshotNamespace | toUpper }}", NULL, "ns-prod", NULL, "NS-PROD"},
	    {"{{ .VolumeSnapshotNamespace | toLower }}", NULL, "ns-PROD", NULL, "ns-prod"},
	    {"{{ .VolumeSnapshotNamespace | field \"-\" 1 }}", NULL, "ns-prod-default", NULL,
	     "prod"},
	    {"{{ .VolumeSnapshotNamespace | substring 0 4 }}", NULL, "prod-12345", NULL, "prod"},
	    {"{{ .VolumeSnapshotNamespace | field \"-\" 1 }}", NULL, NULL, NULL, NULL,
	     "cannot index into split string"},
	    /* the PV's names are not a snapshot's */
	    {"{{ .PVCName }}", "a", "b", "c", NULL,
	     "can't evaluate field PVCName in type *template.VolumeSnapshotProps"},
	};

	run_cases(cases, ARRAY_SIZE(cases), csi_tagtpl_snapshot_fields, CSI_TAGTPL_SNAPSHOT_TYPE);
}

/* upstream's functions at their edges, as Go runs them (substring panics are errors) */
TEST(csi_tagtpl_functions)
{
	PV({"{{ substring 0 100 .PVName }}", NULL, NULL, "pv-abc", "pv-abc", NULL},
	   {"{{ substring -1 2 .PVName }}", NULL, NULL, "pv-abc", "pv", NULL},
	   {"{{ substring 2 -1 .PVName }}", NULL, NULL, "pv-abc", "-abc", NULL},
	   {"{{ substring -1 100 .PVName }}", NULL, NULL, "pv-abc", NULL,
	    "slice bounds out of range"},
	   {"{{ substring 4 2 .PVName }}", NULL, NULL, "pv-abc", NULL, "slice bounds out of range"},
	   {"{{ substring 9 100 .PVName }}", NULL, NULL, "pv-abc", NULL, "slice bounds"},
	   {"{{ field \"-\" 0 .PVName }}", NULL, NULL, "pv-abc", "pv", NULL},
	   {"{{ field \"-\" 2 .PVName }}", NULL, NULL, "pv-abc-", "", NULL},
	   {"{{ field \"-\" 5 .PVName }}", NULL, NULL, "pv-a-b", NULL, "index = 5, length = 3"},
	   {"{{ field \"-\" -1 .PVName }}", NULL, NULL, "pv-a", NULL, "index out of range [-1]"},
	   {"{{ field \"\" 1 .PVName }}", NULL, NULL, "pv", "v", NULL},
	   {"{{ field \"--\" 1 .PVName }}", NULL, NULL, "a--b-c", "b-c", NULL},
	   {"{{ index \"-\" .PVName }}", NULL, NULL, "pv-a-b", "2", NULL},
	   {"{{ lastIndex \"-\" .PVName }}", NULL, NULL, "pv-a-b", "4", NULL},
	   {"{{ index \"x\" .PVName }}", NULL, NULL, "pv-a-b", "-1", NULL},
	   {"{{ lastIndex \"\" .PVName }}", NULL, NULL, "pv", "2", NULL},
	   {"{{ contains \"\" .PVName }}", NULL, NULL, "pv", "true", NULL},
	   {"{{ contains \"prod\" .PVName }}", NULL, NULL, "pv", "false", NULL},
	   {"{{ .PVName | toUpper | toLower }}", NULL, NULL, "Pv-X", "pv-x", NULL}, );
}

/* Go's builtins, actions and literals */
TEST(csi_tagtpl_go_template)
{
	PV({"{{ if contains \"prod\" .PVCNamespace }}critical{{ else }}normal{{ end }}", NULL,
	    "ns-prod", NULL, "critical", NULL},
	   {"{{ if eq .PVCNamespace \"a\" }}A{{ else if eq .PVCNamespace \"b\" }}B{{ else }}C{{ "
	    "end }}",
	    NULL, "b", NULL, "B", NULL},
	   {"{{ with .PVName }}pv={{ . }}{{ else }}none{{ end }}", NULL, NULL, NULL, "none", NULL},
	   {"{{ with .PVName }}{{ $.PVCName }}/{{ . }}{{ end }}", "c", NULL, "v", "c/v", NULL},
	   {"{{ with .PVCName }}1{{ else with .PVName }}{{ . }}{{ end }}", NULL, NULL, "v", "v",
	    NULL},
	   {"{{ .PVName | }}", NULL, NULL, "v", "v", NULL}, /* Go's parser accepts a last "|" */
	   /* a branch that does not run is parsed, not run */
	   {"{{ if false }}{{ .Nope }}{{ end }}ok", NULL, NULL, NULL, "ok", NULL},
	   {"{{ if false }}{{ nope }}{{ end }}", NULL, NULL, NULL, NULL,
	    "function \"nope\" not defined"},
	   {"{{ or .PVCName \"none\" }}", NULL, NULL, NULL, "none", NULL},
	   {"{{ and .PVCName (field \"-\" 9 .PVCName) }}", NULL, NULL, NULL, "", NULL},
	   {"{{ \"x\" | and \"\" }}", NULL, NULL, NULL, "", NULL},
	   {"{{ not .PVCName }}", NULL, NULL, NULL, "true", NULL},
	   {"{{ len .PVName }}", NULL, NULL, "pv-1", "4", NULL},
	   {"{{ eq .PVCNamespace \"prod\" \"default\" }}", NULL, "default", NULL, "true", NULL},
	   {"{{ ne 1 2 }} {{ lt \"a\" \"b\" }} {{ ge 2 2 }} {{ gt -1 0 }}", NULL, NULL, NULL,
	    "true true true false", NULL},
	   {"{{ eq 1 \"1\" }}", NULL, NULL, NULL, NULL, "incompatible types for comparison"},
	   {"{{ lt true false }}", NULL, NULL, NULL, NULL, "invalid type for comparison"},
	   {"{{ eq 1 }}", NULL, NULL, NULL, NULL, "missing argument for comparison"},
	   {"{{ print 1 2 \"a\" 3 true }}", NULL, NULL, NULL, "1 2a3 true", NULL},
	   {"{{ println 1 \"a\" }}", NULL, NULL, NULL, "1 a\n", NULL},
	   {"{{ printf \"%s-%d-%t-%v%%\" .PVName 5 true \"x\" }}", NULL, NULL, "pv", "pv-5-true-x%",
	    NULL},
	   {"{{ printf \"%d|%s|%s\" \"x\" 7 }}", NULL, NULL, NULL,
	    "%!d(string=x)|%!s(int=7)|%!s(MISSING)", NULL},
	   {"{{ printf \"a\" 1 \"b\" }}", NULL, NULL, NULL, "a%!(EXTRA int=1, string=b)", NULL},
	   {"{{ printf \"%T %T\" . 1 }}", NULL, NULL, NULL, "*template.PVProps int", NULL},
	   {"{{ printf \"%x\" 1 }}", NULL, NULL, NULL, NULL, "%x is not supported"},
	   {"{{ printf \"%5s\" \"a\" }}", NULL, NULL, NULL, NULL, "%5 is not supported"},
	   {"{{ slice .PVName 1 3 }}{{ slice .PVName 2 }}", NULL, NULL, "pv-1", "v--1", NULL},
	   {"{{ slice .PVName 1 2 3 }}", NULL, NULL, "pv", NULL, "cannot 3-index slice a string"},
	   {"{{ slice .PVName 3 }}", NULL, NULL, "pv", NULL, "index out of range: 3"},
	   {"{{ . }}", "c", "n", "v", "{c n v}", NULL},
	   {"{{ print . }}", "c", NULL, "v", "&{c  v}", NULL},
	   {"a  {{- .PVCName -}}  b", "c", NULL, NULL, "acb", NULL},
	   {"a {{- /* note */ -}} b{{/* x */}}", NULL, NULL, NULL, "ab", NULL},
	   {"{{-3}}", NULL, NULL, NULL, "-3", NULL},
	   {"a}}b {{ \"{{\" }}", NULL, NULL, NULL, "a}}b {{", NULL},
	   {"{{ \"a\\tb\\u00e9\\x41\\101\" }}", NULL, NULL, NULL,
	    "a\tb\xc3\xa9"
	    "AA",
	    NULL},
	   {"{{ `a\\n\"b` }}", NULL, NULL, NULL, "a\\n\"b", NULL},
	   {"{{ substring 0x1 0b11 \"abcdef\" }}{{ 0o10 }}{{ 010 }}", NULL, NULL, NULL, "bc88",
	    NULL},
	   {"{{ toUpper (field \"-\" 1 .PVCNamespace) }}", NULL, "ns-prod-x", NULL, "PROD", NULL},
	   {"{{ (.PVCNamespace | field \"-\" 2) | printf \"%s!\" | toUpper }}", NULL, "ns-prod-x",
	    NULL, "X!", NULL},
	   {"{{ printf \"%s/%s\" (.PVCNamespace | toUpper) (substring 0 2 .PVName) }}", NULL, "ns",
	    "pv-1", "NS/pv", NULL},
	   {"{{ (print .PVName).Foo }}", NULL, NULL, "pv", NULL,
	    "can't evaluate field Foo in type string"},
	   {"{{ with $ }}{{ .PVName }}{{ end }}", NULL, NULL, "pv", "pv", NULL}, );
}

/* what Go refuses, what we refuse (outside the supported part), and the caps */
TEST(csi_tagtpl_errors)
{
	PV({"{{ .PVCName", NULL, NULL, NULL, NULL, "unclosed action"},
	   {"x {{", NULL, NULL, NULL, NULL, "unclosed action"},
	   {"{{ .PVName | upper }}", NULL, NULL, NULL, NULL, "function \"upper\" not defined"},
	   {"{{ substring 0 .PVName }}", NULL, NULL, "pv", NULL,
	    "wrong number of args for substring: want 3 got 2"},
	   {"{{ toUpper }}", NULL, NULL, NULL, NULL,
	    "wrong number of args for toUpper: want 1 got 0"},
	   {"{{ and }}", NULL, NULL, NULL, NULL, "want at least 1 got 0"},
	   {"{{ substring \"0\" 2 .PVName }}", NULL, NULL, "pv", NULL,
	    "wrong type for argument 1 of substring: expected int; got string"},
	   {"{{ contains \"a\" . }}", NULL, NULL, NULL, NULL,
	    "expected string; got *template.PVProps"},
	   {"{{ .PVName | contains \"p\" | toUpper }}", NULL, NULL, "pv", NULL, "got bool"},
	   {"{{ .Foo }}", NULL, NULL, NULL, NULL,
	    "can't evaluate field Foo in type *template.PVProps"},
	   {"{{ .PVCName.Foo }}", NULL, NULL, NULL, NULL,
	    "can't evaluate field Foo in type string"},
	   {"{{ .PVCName \"x\" }}", NULL, NULL, NULL, NULL, "can't give argument to non-function"},
	   {"{{ \"a\" | \"b\" }}", NULL, NULL, NULL, NULL,
	    "non executable command in pipeline stage 2"},
	   {"{{ }}", NULL, NULL, NULL, NULL, "missing value for command"},
	   {"{{ .PVName | | toUpper }}", NULL, NULL, NULL, NULL, "unexpected \"|\" in command"},
	   {"{{ | }}", NULL, NULL, NULL, NULL, "unexpected \"|\" in command"},
	   {"{{ ( }}", NULL, NULL, NULL, NULL, "unclosed left paren"},
	   {"{{ if .PVCName }}1{{ else with .PVName }}{{ . }}{{ end }}{{ end }}", NULL, NULL, "v",
	    NULL, "unexpected \"with\" in input"},
	   {"{{ with .PVCName }}1{{ else if .PVName }}2{{ end }}", NULL, NULL, "v", NULL,
	    "unexpected \"if\" in input"},
	   {"{{ () }}", NULL, NULL, NULL, NULL, "missing value for parenthesized pipeline"},
	   {"{{ (.PVName }}", NULL, NULL, NULL, NULL, "unclosed left paren"},
	   {"{{ .PVName) }}", NULL, NULL, NULL, NULL, "unexpected right paren"},
	   {"{{ \"a\".Foo }}", NULL, NULL, NULL, NULL, "unexpected . after term"},
	   {"{{ \"abc }}", NULL, NULL, NULL, NULL, "unterminated quoted string"},
	   {"{{ `abc }}", NULL, NULL, NULL, NULL, "unterminated raw quoted string"},
	   {"{{ \"\\q\" }}", NULL, NULL, NULL, NULL, "invalid syntax"},
	   {"{{ \"\\x00\" }}", NULL, NULL, NULL, NULL, "NUL character is not supported"},
	   {"{{ \"\\ud800\" }}", NULL, NULL, NULL, NULL, "invalid syntax"},
	   {"{{ end }}", NULL, NULL, NULL, NULL, "unexpected {{end}}"},
	   {"{{ else }}", NULL, NULL, NULL, NULL, "unexpected {{else}}"},
	   {"{{ if true }}x", NULL, NULL, NULL, NULL, "unexpected EOF"},
	   {"{{ if true }}x{{ else }}y{{ else }}z{{ end }}", NULL, NULL, NULL, NULL,
	    "expected {{end}}; found {{else}}"},
	   {"{{ if }}x{{ end }}", NULL, NULL, NULL, NULL, "missing value for if"},
	   {"{{ end 1 }}", NULL, NULL, NULL, NULL, "unexpected \"1\" in end"},
	   {"{{/* x", NULL, NULL, NULL, NULL, "unclosed comment"},
	   {"{{/* x */ }}", NULL, NULL, NULL, NULL, "comment ends before closing delimiter"},
	   {"{{ nil }}", NULL, NULL, NULL, NULL, "nil is not a command"},
	   {"{{ 1.5 }}", NULL, NULL, NULL, NULL, "floating-point"},
	   {"{{ 1_000 }}", NULL, NULL, NULL, NULL, "underscored"},
	   {"{{ 12ab }}", NULL, NULL, NULL, NULL, "bad number syntax"},
	   {"{{ - }}", NULL, NULL, NULL, NULL, "bad number syntax"},
	   {"{{ 99999999999999999999 }}", NULL, NULL, NULL, NULL, "integer overflow"},
	   {"{{ 'a' }}", NULL, NULL, NULL, NULL, "character constants are not supported"},
	   {"{{ $x := 1 }}", NULL, NULL, NULL, NULL, "variables are not supported"},
	   {"{{ $x }}", NULL, NULL, NULL, NULL, "undefined variable \"$x\""},
	   {"{{ range .PVName }}{{ end }}", NULL, NULL, NULL, NULL, "{{range}} is not supported"},
	   {"{{ template \"x\" }}", NULL, NULL, NULL, NULL, "{{template}} is not supported"},
	   {"{{ \xc3\xa9 }}", NULL, NULL, NULL, NULL, "unrecognized character in action: 0xc3"},
	   {"{{ .PVName , }}", NULL, NULL, NULL, NULL, "unexpected \",\" in operand"},
	   {"{{ .PVName}x }}", NULL, NULL, NULL, NULL, "bad character '}' after \"PVName\""}, );
}

/* Non-ASCII: bytes as Go's strings are (substring and len count bytes, field "" splits
 * UTF-8 sequences); toUpper and toLower change ASCII letters only (Go maps Unicode). */
TEST(csi_tagtpl_non_ascii)
{
	PV({"{{ \"h\xc3\xa9llo\" | toUpper }}", NULL, NULL, NULL, "H\xc3\xa9LLO", NULL},
	   {"{{ len \"h\xc3\xa9\" }}", NULL, NULL, NULL, "3", NULL},
	   {"{{ substring 0 2 \"h\xc3\xa9\" }}", NULL, NULL, NULL, "h\xc3", NULL},
	   {"{{ field \"\" 1 \"h\xc3\xa9x\" }}", NULL, NULL, NULL, "\xc3\xa9", NULL},
	   {"{{ field \"\" 2 \"h\xc3\xa9x\" }}", NULL, NULL, NULL, "x", NULL},
	   {"{{ \"\\u00e9\\U0001F600\" }}", NULL, NULL, NULL, "\xc3\xa9\xf0\x9f\x98\x80", NULL},
	   {"caf\xc3\xa9-{{ .PVName }}", NULL, NULL, "pv", "caf\xc3\xa9-pv", NULL}, );
}

TEST(csi_tagtpl_caps)
{
	char *big = malloc(CSI_TAGTPL_MAX_IN + 2), *out = NULL, err[256];
	char *long_value = malloc(3001);
	char deep[256] = "{{ ";
	const char *values[3] = {"c", "n", long_value};
	const struct csi_tagtpl_props props = {CSI_TAGTPL_PV_TYPE, csi_tagtpl_pv_fields, values, 3};

	ASSERT_TRUE(big && long_value);
	memset(big, 'x', CSI_TAGTPL_MAX_IN + 1);
	big[CSI_TAGTPL_MAX_IN + 1] = 0;
	ASSERT_ERR(csi_tagtpl_eval(big, &props, &out, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "longer than 4096 bytes");
	big[CSI_TAGTPL_MAX_IN] = 0; /* exactly the cap: plain text, copied */
	ASSERT_OK(csi_tagtpl_eval(big, &props, &out, err, sizeof(err)));
	ASSERT_EQ(strlen(out), CSI_TAGTPL_MAX_IN);
	free(out);
	free(big);

	memset(long_value, 'v', 3000);
	long_value[3000] = 0;
	ASSERT_OK(csi_tagtpl_eval("{{ .PVName }}", &props, &out, err, sizeof(err)));
	ASSERT_EQ(strlen(out), 3000);
	free(out);
	ASSERT_ERR(csi_tagtpl_eval("{{ .PVName }}{{ .PVName }}", &props, &out, err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "longer than 4096 bytes");
	ASSERT_ERR(csi_tagtpl_eval("{{ print .PVName .PVName }}", &props, &out, err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "longer than 4096 bytes");
	/* many values: the arena of one evaluation is bounded too */
	ASSERT_ERR(csi_tagtpl_eval("{{ .PVName | toUpper | toLower | toUpper | toLower | toUpper | "
				   "toLower | toUpper | toLower | toUpper | toLower | toUpper | "
				   "toLower | toUpper | toLower | toUpper | toLower | toUpper | "
				   "toLower | toUpper | toLower | toUpper | toLower | toUpper }}",
				   &props, &out, err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "bytes of strings");
	free(long_value);

	/* nesting */
	for (int i = 0; i < 40; i++)
		strcat(deep, "(");
	strcat(deep, "1");
	for (int i = 0; i < 40; i++)
		strcat(deep, ")");
	strcat(deep, " }}");
	ASSERT_ERR(csi_tagtpl_eval(deep, &props, &out, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "nested deeper than 32");
	ASSERT_OK(csi_tagtpl_eval("{{ ((((1)))) }}", &props, &out, err, sizeof(err)));
	ASSERT_STREQ(out, "1");
	free(out);
}

/* the message a failed tag gets: the parameter, the value, the cause, what is known */
TEST(csi_tagtpl_expand_message)
{
	const char *values[3] = {"c", "n", "v"};
	const struct csi_tagtpl_props props = {CSI_TAGTPL_PV_TYPE, csi_tagtpl_pv_fields, values, 3};
	char err[512], *out = NULL;

	ASSERT_ERR(csi_tagtpl_expand("tagSpecification_1", "{{ .PVName | upper }}", &props, &out,
				     err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "tagSpecification_1: cannot expand \"{{ .PVName | upper }}\": "
			     "function \"upper\" not defined (known: variables .PVCName "
			     ".PVCNamespace .PVName; functions contains field index lastIndex "
			     "substring toLower toUpper and or not len eq ne lt le gt ge print "
			     "println printf slice; actions if else with end)");
	ASSERT_OK(csi_tagtpl_expand("tagSpecification_1", "x-{{ .PVName | toUpper }}", &props, &out,
				    err, sizeof(err)));
	ASSERT_STREQ(out, "x-V");
	free(out);
}

/* wired into CreateVolume's parameters: a function, and upstream's warn-only case (a bad
 * template skipped, the next tag kept) */
TEST(csi_tagtpl_in_volume_parameters)
{
	struct csi_vol_params p;
	char err[512];
	struct csi_kv kv[] = {
	    KV("csi.storage.k8s.io/pvc/namespace", "ns-prod-abcdef"),
	    KV("tagSpecification_1", "backup={{ .PVCNamespace | contains \"prod\" }}"),
	    KV("tagSpecification_2", "billingID={{ .PVCNamespace | field \"-\" 2 | toUpper }}")};
	struct csi_kv warn[] = {KV("csi.storage.k8s.io/pvc/namespace", "default"),
				KV("tagSpecification_1", "key1={{ .PVCName }"),
				KV("tagSpecification_2", "key2={{ .PVCNamespace }}")};
	struct csi_tag_opts o = {.warn_on_invalid_tag = true};
	bool backup = false, billing = false, key2 = false;

	ASSERT_OK(csi_vol_params_parse(kv, ARRAY_SIZE(kv), NULL, &p, err, sizeof(err)));
	for (size_t i = 0; i < p.n_tags; i++) {
		backup |= !strcmp(p.tags[i].key, "backup") && !strcmp(p.tags[i].value, "true");
		billing |=
		    !strcmp(p.tags[i].key, "billingID") && !strcmp(p.tags[i].value, "ABCDEF");
	}
	csi_vol_params_release(&p);
	ASSERT_TRUE(backup);
	ASSERT_TRUE(billing);

	ASSERT_ERR(csi_vol_params_parse(warn, ARRAY_SIZE(warn), NULL, &p, err, sizeof(err)),
		   EINVAL);
	ASSERT_CONTAINS(err, "invalid tag: tagSpecification_1: cannot expand \"{{ .PVCName }\"");
	ASSERT_CONTAINS(err, "known: variables .PVCName");
	ASSERT_OK(csi_vol_params_parse(warn, ARRAY_SIZE(warn), &o, &p, err, sizeof(err)));
	for (size_t i = 0; i < p.n_tags; i++) {
		ASSERT_TRUE(strcmp(p.tags[i].key, "key1") != 0);
		key2 |= !strcmp(p.tags[i].key, "key2") && !strcmp(p.tags[i].value, "default");
	}
	csi_vol_params_release(&p);
	ASSERT_TRUE(key2);
}
