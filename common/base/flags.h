/* Command-line flags from one table per subcommand.
 *
 *   static char *cloud_config;
 *   static const struct flag ccm_flags[] = {
 *           { "cloud-config", FLAG_STRING, &cloud_config, NULL, NULL, "Path to the cloud config." },
 *           LOG_FLAGS,
 *           { NULL },
 *   };
 *   int n = flags_parse("ccm", ccm_usage, ccm_flags, argc, argv);
 *   if (n < 0) return flags_exit_code(n);
 *
 * As Go's flag package and pflag take them: --name=value, --name value, -name=value and
 * -name value; a bool takes no value or =true/=false (never a separate word); '_' and '-' are
 * the same in a name (--log_dir is --log-dir, as Kubernetes components normalize them). Each
 * flag is first set from its default, then from its environment variable when that is set and
 * not empty, then from the command line. Positional arguments are moved to argv[0..n) and
 * counted in the return value; "--" ends the flags. A flag with a NULL destination is parsed
 * and checked, then ignored (for upstream flags without effect here).
 *
 * Besides its table, every command takes the klog and component-base logging flags of
 * Kubernetes components (flags_klog below: --logtostderr, --log-file, --vmodule, ...) and, once
 * main has called flags_set_version, --version. A flag marked no_effect, given on the command
 * line with a value other than its default, is named in one warning line after the parse. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

enum flag_type {
	FLAG_BOOL,     /* bool */
	FLAG_INT,      /* long long, within [min, max] when min < max */
	FLAG_FLOAT,    /* double */
	FLAG_DURATION, /* int64_t nanoseconds, Go syntax: 30s, 5m, 1h30m */
	FLAG_STRING,   /* char * (malloc'd; NULL when unset without default) */
	FLAG_STRLIST,  /* char ** NULL-terminated vector; comma-separated and repeatable */
	FLAG_MAP,      /* char ** vector of "key=value"; comma-separated and repeatable */
};

struct flag {
	const char *name;
	enum flag_type type;
	void *dest;
	const char *def;
	const char *env;
	const char *help;
	long long min, max;
	/* FLAG_STRING, FLAG_STRLIST: the values allowed, comma-separated ("imds,kubernetes");
	 * NULL: any */
	const char *choices;
	/* accepted for compatibility without an effect here: warned about when given */
	bool no_effect;
};

/* Flags every subcommand has, listed among its own. klog takes any -v; above 10 is 10 here. */
#define LOG_FLAGS                                                                                  \
	{ "v", FLAG_INT, &log_flag_v, "0", NULL, "Number for the log level verbosity.", 0,         \
	  INT32_MAX },                                                                             \
	{                                                                                          \
		"logging-format", FLAG_STRING, &log_flag_format, "text", NULL,                     \
			"Sets the log format. Permitted formats: \"json\", \"text\"."              \
	}

/* The klog flags with an effect here (the others are accepted and warned about): logs go to
 * stderr, or with --logtostderr=false and --log-file to that file (appended to; errors are not
 * copied to stderr, and the file is never rotated). */
struct flags_klog {
	bool logtostderr; /* --logtostderr (default true) */
	char *log_file;	  /* --log-file */
};
extern struct flags_klog flags_klog;

/* How --version prints, for the command main runs: called with "true", or with the value of
 * --version=VALUE when that is not a bool ("raw"); returns 0 after printing, -EINVAL for a
 * value it does not take. NULL (the default): --version is an unknown flag. */
typedef int (*flags_version_fn)(const char *value);
void flags_set_version(flags_version_fn fn);

/* Returns the number of positional arguments, -ECANCELED after printing --help or --version to
 * stdout, or -EINVAL after printing one line naming the bad flag to stderr. Applies LOG_FLAGS
 * and flags_klog. In check mode (below) it never returns a count. */
int flags_parse(const char *cmd, const char *usage, const struct flag *table, int argc, char **argv);
/* Check mode (`aws-k8s flags-check CMD ARGS...`): flags_parse reads the defaults, the
 * environment and the command line exactly as for a run, then returns -ECANCELED (exit 0)
 * instead of a count, so that every command stops before it starts anything; a positional
 * argument is refused (-EINVAL, exit 2) and --log-file is not opened. flags_check_parsed
 * tells whether a flags_parse ran since check mode was turned on. */
void flags_set_check_only(bool on);
bool flags_check_parsed(void);
/* 0 for -ECANCELED (help shown), 2 for a usage error. */
int flags_exit_code(int r);
/* Prints the generated help of a table. */
void flags_print_help(const char *cmd, const char *usage, const struct flag *table);
/* Frees what flags_parse allocated for the table's destinations (and for the klog flags). */
void flags_free(const struct flag *table);
/* Looks up "key" in a FLAG_MAP vector; NULL when absent. */
const char *flags_map_get(char *const *map, const char *key);
