#include "common/base/flags.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"

static const char *type_name(enum flag_type t)
{
	switch (t) {
	case FLAG_BOOL:
		return "";
	case FLAG_INT:
		return "int";
	case FLAG_FLOAT:
		return "float";
	case FLAG_DURATION:
		return "duration";
	case FLAG_STRING:
		return "string";
	case FLAG_STRLIST:
		return "strings";
	case FLAG_MAP:
		return "mapStringString";
	}
	return "";
}

/* replace: a command-line value replaces what a default or the environment set, once */
static int flag_set(const struct flag *f, const char *v, bool *replaced)
{
	int r;

	switch (f->type) {
	case FLAG_BOOL: {
		bool b;
		if ((r = str_to_bool(v, &b)) < 0)
			return r;
		if (f->dest)
			*(bool *)f->dest = b;
		return 0;
	}
	case FLAG_INT: {
		long long x;
		long long lo = f->min < f->max ? f->min : INT64_MIN;
		long long hi = f->min < f->max ? f->max : INT64_MAX;
		if ((r = str_to_ll(v, lo, hi, &x)) < 0)
			return r;
		if (f->dest)
			*(long long *)f->dest = x;
		return 0;
	}
	case FLAG_FLOAT: {
		double d;
		if ((r = str_to_double(v, &d)) < 0)
			return r;
		if (f->dest)
			*(double *)f->dest = d;
		return 0;
	}
	case FLAG_DURATION: {
		int64_t ns;
		if ((r = duration_parse(v, &ns)) < 0)
			return r;
		if (f->dest)
			*(int64_t *)f->dest = ns;
		return 0;
	}
	case FLAG_STRING: {
		if (!f->dest)
			return 0;
		char *s = strdup(v);
		if (!s)
			return -ENOMEM;
		free(*(char **)f->dest);
		*(char **)f->dest = s;
		return 0;
	}
	case FLAG_STRLIST:
	case FLAG_MAP: {
		char **items = NULL;
		if ((r = strv_split(v, ',', &items)) < 0)
			return r;
		if (f->type == FLAG_MAP)
			for (char **p = items; *p; p++)
				if (!strchr(*p, '=') || **p == '=') {
					strv_free(items);
					return -EINVAL;
				}
		if (!f->dest) {
			strv_free(items);
			return 0;
		}
		char ***dest = f->dest;
		if (replaced && !*replaced) {
			strv_free(*dest);
			*dest = NULL;
			*replaced = true;
		}
		for (char **p = items; *p; p++)
			if ((r = strv_push(dest, *p)) < 0) {
				strv_free(items);
				return r;
			}
		strv_free(items);
		if (!*dest)
			*dest = calloc(1, sizeof(char *));
		return *dest ? 0 : -ENOMEM;
	}
	}
	return -EINVAL;
}

static void flag_reset(const struct flag *f)
{
	if (!f->dest)
		return;
	switch (f->type) {
	case FLAG_BOOL:
		*(bool *)f->dest = false;
		break;
	case FLAG_INT:
		*(long long *)f->dest = 0;
		break;
	case FLAG_FLOAT:
		*(double *)f->dest = 0;
		break;
	case FLAG_DURATION:
		*(int64_t *)f->dest = 0;
		break;
	case FLAG_STRING:
		free(*(char **)f->dest);
		*(char **)f->dest = NULL;
		break;
	case FLAG_STRLIST:
	case FLAG_MAP:
		strv_free(*(char ***)f->dest);
		*(char ***)f->dest = NULL;
		break;
	}
}

void flags_free(const struct flag *table)
{
	for (const struct flag *f = table; f->name; f++)
		flag_reset(f);
}

const char *flags_map_get(char *const *map, const char *key)
{
	size_t kl = strlen(key);
	for (size_t i = 0; map && map[i]; i++)
		if (strncmp(map[i], key, kl) == 0 && map[i][kl] == '=')
			return map[i] + kl + 1;
	return NULL;
}

void flags_print_help(const char *cmd, const char *usage, const struct flag *table)
{
	printf("Usage: aws-k8s %s [flags]\n\n%s\n\nFlags:\n", cmd, usage ? usage : "");
	for (const struct flag *f = table; f->name; f++) {
		char left[96];
		snprintf(left, sizeof(left), "      --%s %s", f->name, type_name(f->type));
		printf("%-48s %s", left, f->help ? f->help : "");
		if (f->def && *f->def && !(f->type == FLAG_BOOL && strcmp(f->def, "false") == 0))
			printf(f->type == FLAG_STRING ? " (default \"%s\")" : " (default %s)", f->def);
		if (f->env)
			printf(" [$%s]", f->env);
		putchar('\n');
	}
	printf("%-48s %s\n", "  -h, --help", "Help for this command.");
}

static const struct flag *flag_find(const struct flag *table, const char *name, size_t len)
{
	for (const struct flag *f = table; f->name; f++)
		if (strlen(f->name) == len && memcmp(f->name, name, len) == 0)
			return f;
	return NULL;
}

static int bad(const char *cmd, const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "aws-k8s %s: ", cmd);
	fprintf(stderr, fmt, a, b);
	fprintf(stderr, " (see 'aws-k8s %s --help')\n", cmd);
	return -EINVAL;
}

int flags_exit_code(int r)
{
	return r == -ECANCELED ? 0 : 2;
}

int flags_parse(const char *cmd, const char *usage, const struct flag *table, int argc, char **argv)
{
	int npos = 0, r;
	bool replaced[256] = { false };
	size_t nflags = 0;

	for (const struct flag *f = table; f->name; f++, nflags++) {
		flag_reset(f);
		if (f->def && (r = flag_set(f, f->def, NULL)) < 0)
			return bad(cmd, "bad default for flag '--%s': '%s'", f->name, f->def);
		const char *e = f->env ? getenv(f->env) : NULL;
		if (e && *e && (r = flag_set(f, e, NULL)) < 0)
			return bad(cmd, "invalid value of $%s: '%s'", f->env, e);
	}
	if (nflags > ARRAY_SIZE(replaced))
		return bad(cmd, "%s%s: too many flags in one table", "", "");
	for (int i = 1; i < argc; i++) {
		char *a = argv[i];
		if (strcmp(a, "--") == 0) {
			for (i++; i < argc; i++)
				argv[npos++] = argv[i];
			break;
		}
		if (a[0] != '-' || a[1] == 0) {
			argv[npos++] = a;
			continue;
		}
		const char *name = a + 1 + (a[1] == '-');
		if (strcmp(name, "help") == 0 || strcmp(name, "h") == 0) {
			flags_print_help(cmd, usage, table);
			return -ECANCELED;
		}
		const char *eq = strchr(name, '=');
		size_t nl = eq ? (size_t)(eq - name) : strlen(name);
		const struct flag *f = flag_find(table, name, nl);
		if (!f)
			return bad(cmd, "unknown flag '%s'%s", a, "");
		const char *v = eq ? eq + 1 : NULL;
		if (!v) {
			if (f->type == FLAG_BOOL)
				v = "true";
			else if (i + 1 < argc)
				v = argv[++i];
			else
				return bad(cmd, "flag '--%s' needs a value%s", f->name, "");
		}
		if ((r = flag_set(f, v, &replaced[f - table])) < 0) {
			char what[64];
			snprintf(what, sizeof(what), "invalid %s value",
				 f->type == FLAG_BOOL ? "bool" : type_name(f->type));
			fprintf(stderr, "aws-k8s %s: %s '%s' for flag '--%s'%s (see 'aws-k8s %s --help')\n",
				cmd, what, v, f->name,
				r == -ERANGE && f->min < f->max ? " (out of range)" : "", cmd);
			return -EINVAL;
		}
	}
	if (log_apply_flags() < 0) {
		fprintf(stderr, "aws-k8s %s: invalid --v or --logging-format (see 'aws-k8s %s --help')\n",
			cmd, cmd);
		return -EINVAL;
	}
	return npos;
}
