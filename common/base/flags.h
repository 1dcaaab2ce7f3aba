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
 * Both --name=value and --name value (and a single dash) are accepted; a bool takes no value
 * or =true/=false. Each flag is first set from its default, then from its environment variable
 * when that is set and not empty, then from the command line. Positional arguments are moved
 * to argv[0..n) and counted in the return value; "--" ends the flags. A flag with a NULL
 * destination is parsed and checked, then ignored (for upstream flags without effect here). */
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
};

/* Flags every subcommand has. */
#define LOG_FLAGS                                                                                  \
	{ "v", FLAG_INT, &log_flag_v, "0", NULL, "Number for the log level verbosity.", 0, 10 },   \
	{                                                                                          \
		"logging-format", FLAG_STRING, &log_flag_format, "text", NULL,                     \
			"Sets the log format. Permitted formats: \"json\", \"text\"."              \
	}

/* Returns the number of positional arguments, -ECANCELED after printing --help to stdout, or
 * -EINVAL after printing one line naming the bad flag to stderr. Applies LOG_FLAGS. */
int flags_parse(const char *cmd, const char *usage, const struct flag *table, int argc, char **argv);
/* 0 for -ECANCELED (help shown), 2 for a usage error. */
int flags_exit_code(int r);
/* Prints the generated help of a table. */
void flags_print_help(const char *cmd, const char *usage, const struct flag *table);
/* Frees what flags_parse allocated for the table's destinations. */
void flags_free(const struct flag *table);
/* Looks up "key" in a FLAG_MAP vector; NULL when absent. */
const char *flags_map_get(char *const *map, const char *key);
