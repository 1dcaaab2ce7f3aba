/* Logging: klog-compatible lines on stderr, or JSON lines.
 *
 *   I1202 15:04:05.123456    4321 ccm_node.c:120] "initialized node" node="ip-10-0-0-1" zone="us-east-1a"
 *
 * Structured key/value pairs are passed as KV_* items; every string value and the message
 * pass through log_redact() so that a secret cannot be logged by accident. The arguments of
 * log_v() are not evaluated when the verbosity is below the level asked for. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

enum log_level { LOG_INFO = 'I', LOG_WARNING = 'W', LOG_ERROR = 'E', LOG_FATAL = 'F' };
enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };
enum log_kv_type { LOG_KV_END, LOG_KV_STR, LOG_KV_INT, LOG_KV_UINT, LOG_KV_DOUBLE, LOG_KV_ERR, LOG_KV_BOOL };

struct log_kv {
	const char *key;
	enum log_kv_type type;
	union {
		const char *s;
		long long i;
		unsigned long long u;
		double d;
		int err; /* a negative errno */
		bool b;
	};
};

#define KV_S(k, v) ((struct log_kv){ .key = (k), .type = LOG_KV_STR, .s = (v) })
#define KV_I(k, v) ((struct log_kv){ .key = (k), .type = LOG_KV_INT, .i = (long long)(v) })
#define KV_U(k, v) ((struct log_kv){ .key = (k), .type = LOG_KV_UINT, .u = (unsigned long long)(v) })
#define KV_D(k, v) ((struct log_kv){ .key = (k), .type = LOG_KV_DOUBLE, .d = (double)(v) })
#define KV_B(k, v) ((struct log_kv){ .key = (k), .type = LOG_KV_BOOL, .b = (v) })
#define KV_E(r) ((struct log_kv){ .key = "err", .type = LOG_KV_ERR, .err = (r) })
#define LOG_END ((struct log_kv){ .key = NULL, .type = LOG_KV_END })

extern int log_verbosity;
extern enum log_format log_format;

/* Flag targets shared by every subcommand (see LOG_FLAGS in flags.h). */
extern long long log_flag_v;
extern char *log_flag_format;

int log_apply_flags(void);
void log_set_output(int fd);
void log_emit(enum log_level level, const char *file, int line, const char *msg, ...);

#define log_info(...) log_emit(LOG_INFO, __FILE__, __LINE__, __VA_ARGS__, LOG_END)
#define log_warn(...) log_emit(LOG_WARNING, __FILE__, __LINE__, __VA_ARGS__, LOG_END)
#define log_error(...) log_emit(LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__, LOG_END)
#define log_v(n, ...)                                                                              \
	do {                                                                                       \
		if (log_verbosity >= (n))                                                          \
			log_emit(LOG_INFO, __FILE__, __LINE__, __VA_ARGS__, LOG_END);              \
	} while (0)
#define log_enabled(n) (log_verbosity >= (n))

/* Logs at error level and returns r (a negative errno), for `return log_error_errno(r, ...)`. */
#define log_error_errno(r, ...) (log_error(__VA_ARGS__, KV_E(r)), (r))

/* Copies src into dst (size n, always terminated), replacing secrets by "<redacted>": the value
 * of an Authorization, X-Amz-Security-Token or X-aws-ec2-metadata-token header, the signature and
 * credential of a SigV4 header or presigned URL, "Bearer <token>", and the values of JSON or
 * key=value fields whose name says token, secret, password or private key, and the userinfo of a
 * URL ("https://user:<redacted>@host/", "https://<redacted>@host/" for a lone token). Returns
 * dst. */
char *log_redact(const char *src, char *dst, size_t n);
/* True if a field named `key` holds a secret (token, secret, password, key material...). */
bool log_key_is_secret(const char *key);

/* The name of an errno value ("ENOENT"), or "E?" for an unknown one. */
const char *errno_name(int e);
