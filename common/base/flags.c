#include "common/base/flags.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

struct flags_klog flags_klog;
static flags_version_fn version_fn;
static bool check_only, check_parsed;

void flags_set_check_only(bool on)
{
	check_only = on;
	check_parsed = false;
}

bool flags_check_parsed(void)
{
	return check_parsed;
}

void flags_set_version(flags_version_fn fn)
{
	version_fn = fn;
}

/* clang-format off */
#define NO_EFFECT(name, type, def, help) \
	{ name, type, NULL, def, NULL, help, .no_effect = true }

/* The logging flags of Kubernetes components, which every command takes after its own table:
 * klog's (klog.InitFlags) and component-base's (logs/api/v1 AddFlags). */
static const struct flag klog_table[] = {
	LOG_FLAGS,
	{ "logtostderr", FLAG_BOOL, &flags_klog.logtostderr, "true", NULL,
	  "Log to standard error instead of files." },
	{ "log-file", FLAG_STRING, &flags_klog.log_file, NULL, NULL,
	  "If non-empty, use this log file (no effect when --logtostderr=true). Appended to, "
	  "never rotated; errors are not copied to stderr." },
	{ "log-flush-frequency", FLAG_DURATION, NULL, "5s", NULL,
	  "Maximum number of seconds between log flushes (every line is written at once here)." },
	NO_EFFECT("alsologtostderr", FLAG_BOOL, "false",
		  "Log to standard error as well as files (no effect when --logtostderr=true)."),
	NO_EFFECT("log-dir", FLAG_STRING, NULL,
		  "If non-empty, write log files in this directory (no effect when "
		  "--logtostderr=true)."),
	NO_EFFECT("log-file-max-size", FLAG_INT, "1800",
		  "Defines the maximum size a log file can grow to (no effect when "
		  "--logtostderr=true). Unit is megabytes."),
	NO_EFFECT("stderrthreshold", FLAG_STRING, "2",
		  "Logs at or above this threshold go to stderr when writing to files and stderr."),
	NO_EFFECT("vmodule", FLAG_STRING, NULL,
		  "Comma-separated list of pattern=N settings for file-filtered logging."),
	NO_EFFECT("skip-headers", FLAG_BOOL, "false",
		  "If true, avoid header prefixes in the log messages."),
	NO_EFFECT("skip-log-headers", FLAG_BOOL, "false",
		  "If true, avoid headers when opening log files (no effect when "
		  "--logtostderr=true)."),
	NO_EFFECT("one-output", FLAG_BOOL, "false",
		  "If true, only write logs to their native severity level (no effect when "
		  "--logtostderr=true)."),
	NO_EFFECT("add-dir-header", FLAG_BOOL, "false",
		  "If true, adds the file directory to the header of the log messages."),
	NO_EFFECT("log-backtrace-at", FLAG_STRING, ":0",
		  "When logging hits line file:N, emit a stack trace."),
	NO_EFFECT("log-text-split-stream", FLAG_BOOL, "false",
		  "[Alpha] In text format, write error messages to stderr and info messages to "
		  "stdout."),
	NO_EFFECT("log-text-info-buffer-size", FLAG_STRING, "0",
		  "[Alpha] In text format with split output streams, the info messages can be "
		  "buffered for a while."),
	NO_EFFECT("log-json-split-stream", FLAG_BOOL, "false",
		  "[Alpha] In JSON format, write error messages to stderr and info messages to "
		  "stdout."),
	NO_EFFECT("log-json-info-buffer-size", FLAG_STRING, "0",
		  "[Alpha] In JSON format with split output streams, the info messages can be "
		  "buffered for a while."),
	{ NULL },
};
/* clang-format on */

/* Is v one of the comma-separated words of choices (any value when choices is NULL)? */
static bool choice_ok(const char *choices, const char *v)
{
	size_t n = strlen(v);

	if (!choices)
		return true;
	for (const char *p = choices; *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len == n && memcmp(p, v, n) == 0)
			return true;
		p += len + (end != NULL);
	}
	return false;
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
		if (!choice_ok(f->choices, v))
			return -EINVAL;
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
		for (char **p = items; *p; p++)
			if (f->type == FLAG_MAP ? !strchr(*p, '=') || **p == '='
						: !choice_ok(f->choices, *p)) {
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
	for (const struct flag *f = klog_table; f->name; f++)
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

/* '_' and '-' are the same in a flag's name (Kubernetes' WordSepNormalizeFunc). */
static const struct flag *flag_find(const struct flag *table, const char *name, size_t len)
{
	for (const struct flag *f = table; f->name; f++) {
		size_t i = 0;
		while (i < len && f->name[i] &&
		       (f->name[i] == name[i] || (f->name[i] == '-' && name[i] == '_')))
			i++;
		if (i == len && !f->name[len])
			return f;
	}
	return NULL;
}

static const char *choices_word(const struct flag *f)
{
	return f->type == FLAG_STRLIST ? "one or more of" : "one of";
}

static void print_rows(const struct flag *rows, const struct flag *skip)
{
	for (const struct flag *f = rows; f->name; f++) {
		char left[96];
		if (skip && flag_find(skip, f->name, strlen(f->name)))
			continue;
		snprintf(left, sizeof(left), "      --%s %s", f->name, type_name(f->type));
		printf("%-48s %s", left, f->help ? f->help : "");
		if (f->def && *f->def && !(f->type == FLAG_BOOL && strcmp(f->def, "false") == 0))
			printf(f->type == FLAG_STRING ? " (default \"%s\")" : " (default %s)", f->def);
		if (f->choices)
			printf(" (%s: %s)", choices_word(f), f->choices);
		if (f->env)
			printf(" [$%s]", f->env);
		if (f->no_effect)
			printf(" (accepted; no effect here)");
		putchar('\n');
	}
}

void flags_print_help(const char *cmd, const char *usage, const struct flag *table)
{
	printf("Usage: aws-k8s %s [flags]\n\n%s\n\nFlags:\n", cmd, usage ? usage : "");
	print_rows(table, NULL);
	if (version_fn && !flag_find(table, "version", 7))
		printf("%-48s %s\n", "      --version", "Print version information and quit.");
	printf("%-48s %s\n", "  -h, --help", "Help for this command.");
	printf("\nLogging flags (klog and component-base, as every Kubernetes component has):\n");
	print_rows(klog_table, table);
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

/* Does v (from the command line) say what the flag's default says? */
static bool is_default(const struct flag *f, const char *v)
{
	const char *def = f->def ? f->def : "";
	bool a, b;
	long long x, y;
	int64_t d1, d2;

	switch (f->type) {
	case FLAG_BOOL:
		return str_to_bool(v, &a) == 0 && str_to_bool(def, &b) == 0 && a == b;
	case FLAG_INT:
		return str_to_ll(v, INT64_MIN, INT64_MAX, &x) == 0 &&
		       str_to_ll(def, INT64_MIN, INT64_MAX, &y) == 0 && x == y;
	case FLAG_DURATION:
		return duration_parse(v, &d1) == 0 && duration_parse(def, &d2) == 0 && d1 == d2;
	default:
		return strcmp(v, def) == 0;
	}
}

/* "--a, --b": the flags given that have no effect, for the one warning line. */
static void note_no_effect(char *list, size_t n, const char *name)
{
	size_t len = strlen(list), nl = strlen(name);

	for (const char *p = list; (p = strstr(p, name)); p += nl)
		if (p >= list + 2 && p[-1] == '-' && p[-2] == '-' && (p[nl] == ',' || !p[nl]))
			return; /* named already */
	snprintf(list + len, n - len, "%s--%s", len ? ", " : "", name);
}

/* --logtostderr=false with --log-file: the log lines go to that file, opened once per parse
 * (the one a previous parse opened is closed); otherwise to stderr, as before. In check mode
 * nothing is opened or closed. */
static int klog_apply(const char *cmd, char *no_effect, size_t n)
{
	static int file_fd = -1;
	const char *path = flags_klog.log_file;
	int fd = -1;

	if (!flags_klog.logtostderr && (!path || !*path))
		note_no_effect(no_effect, n, "logtostderr=false without --log-file");
	else if (flags_klog.logtostderr && path && *path)
		note_no_effect(no_effect, n, "log-file (with --logtostderr=true)");
	if (check_only)
		return 0;
	if (!flags_klog.logtostderr && path && *path) {
		fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd < 0) {
			fprintf(stderr, "aws-k8s %s: cannot open --log-file '%s': %m\n", cmd, path);
			return -EINVAL;
		}
		log_set_output(fd);
	} else if (file_fd >= 0) {
		log_set_output(STDERR_FILENO);
	}
	if (file_fd >= 0)
		close(file_fd);
	file_fd = fd;
	return 0;
}

static int set_defaults(const char *cmd, const struct flag *table)
{
	int r;

	for (const struct flag *f = table; f->name; f++) {
		flag_reset(f);
		if (f->def && (r = flag_set(f, f->def, NULL)) < 0)
			return bad(cmd, "bad default for flag '--%s': '%s'", f->name, f->def);
		/* the environment's value replaces the default (a list is not appended to it) */
		const char *e = f->env ? getenv(f->env) : NULL;
		if (e && *e) {
			flag_reset(f);
			if ((r = flag_set(f, e, NULL)) < 0)
				return bad(cmd, "invalid value of $%s: '%s'", f->env, e);
		}
	}
	return 0;
}

int flags_parse(const char *cmd, const char *usage, const struct flag *table, int argc, char **argv)
{
	int npos = 0, r;
	bool replaced[256] = { false }, klog_replaced[ARRAY_SIZE(klog_table)] = { false };
	size_t nflags = 0;
	const char *version = NULL;
	char no_effect[512] = "";

	check_parsed = check_only;
	for (const struct flag *f = table; f->name; f++)
		nflags++;
	if (nflags > ARRAY_SIZE(replaced))
		return bad(cmd, "%s%s: too many flags in one table", "", "");
	/* the klog table first: a command's own row for v or logging-format has the last word */
	if ((r = set_defaults(cmd, klog_table)) < 0 || (r = set_defaults(cmd, table)) < 0)
		return r;
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
		bool *rep = f ? &replaced[f - table] : NULL;
		if (!f && (f = flag_find(klog_table, name, nl)))
			rep = &klog_replaced[f - klog_table];
		const char *v = eq ? eq + 1 : NULL;
		if (!f && version_fn && nl == 7 && memcmp(name, "version", 7) == 0) {
			bool b;
			/* a bool, or a word the printer takes (Kubernetes' --version=raw) */
			if (!v || str_to_bool(v, &b) < 0 || b)
				version = v ? v : "true";
			else
				version = NULL;
			continue;
		}
		if (!f)
			return bad(cmd, "unknown flag '%s'%s", a, "");
		if (!v) {
			if (f->type == FLAG_BOOL)
				v = "true";
			else if (i + 1 < argc)
				v = argv[++i];
			else
				return bad(cmd, "flag '--%s' needs a value%s", f->name, "");
		}
		if ((r = flag_set(f, v, rep)) < 0) {
			char what[64], why[160] = "";
			snprintf(what, sizeof(what), "invalid %s value",
				 f->type == FLAG_BOOL ? "bool" : type_name(f->type));
			if (r == -ERANGE && f->min < f->max)
				snprintf(why, sizeof(why), " (out of range)");
			else if (f->choices)
				snprintf(why, sizeof(why), " (%s: %s)", choices_word(f), f->choices);
			fprintf(stderr, "aws-k8s %s: %s '%s' for flag '--%s'%s (see 'aws-k8s %s --help')\n",
				cmd, what, v, f->name, why, cmd);
			return -EINVAL;
		}
		if (f->no_effect && !is_default(f, v))
			note_no_effect(no_effect, sizeof(no_effect), f->name);
	}
	if (version) {
		if (version_fn(version) < 0)
			return bad(cmd, "invalid value '%s' for flag '--version'%s", version, "");
		return -ECANCELED;
	}
	if (log_flag_v > 10)
		log_flag_v = 10;
	if (log_apply_flags() < 0) {
		fprintf(stderr, "aws-k8s %s: invalid --v or --logging-format (see 'aws-k8s %s --help')\n",
			cmd, cmd);
		return -EINVAL;
	}
	if ((r = klog_apply(cmd, no_effect, sizeof(no_effect))) < 0)
		return r;
	if (*no_effect)
		log_warn("flags accepted for compatibility have no effect here",
			 KV_S("flags", no_effect));
	if (check_only) {
		if (npos > 0)
			return bad(cmd, "unexpected argument '%s'%s", argv[0], "");
		return -ECANCELED;
	}
	return npos;
}
