/* Logging: klog-compatible lines on stderr, or JSON lines.
 *
 *   I1202 15:04:05.123456    4321 ccm_node.c:120] "initialized node" node="ip-10-0-0-1" zone="us-east-1a"
 *
 * Structured key/value pairs are passed as KV_* items; every string value and the message
 * pass through log_redact() so that a secret cannot be logged by accident. The arguments of
 * log_v() are not evaluated when the verbosity is below the level asked for.
 *
 *   log_info("attached volume", KV_S("volume", id), KV_I("attempt", n), KV_E(r));
 *
 * The macros collect the items into a typed array that ends with LOG_END, and each item must be
 * a struct log_kv: anything else (a bare string, a number) is a compile error, not undefined
 * behaviour at run time (tests/check/log_typed.sh proves it). At most LOG_MAX_ITEMS items. */
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

/* Set from the flags at start; atomic because the signal thread logs too (and reads them). */
extern _Atomic int log_verbosity;
extern _Atomic enum log_format log_format;

/* Flag targets shared by every subcommand (see LOG_FLAGS in flags.h). */
extern long long log_flag_v;
extern char *log_flag_format;

int log_apply_flags(void);
void log_set_output(int fd);
/* Writes one line: msg, then the items of kv up to the first LOG_KV_END (kv may be NULL). The
 * macros below are the usual way in; call it directly only with an array built at run time. */
void log_emit(enum log_level level, const char *file, int line, const char *msg,
	      const struct log_kv *kv);

#define log_info(...) log_emit(LOG_INFO, __FILE__, __LINE__, LOG_ARGS_(__VA_ARGS__, LOG_END))
#define log_warn(...) log_emit(LOG_WARNING, __FILE__, __LINE__, LOG_ARGS_(__VA_ARGS__, LOG_END))
#define log_error(...) log_emit(LOG_ERROR, __FILE__, __LINE__, LOG_ARGS_(__VA_ARGS__, LOG_END))
#define log_v(n, ...)                                                                              \
	do {                                                                                       \
		if (log_verbosity >= (n))                                                          \
			log_emit(LOG_INFO, __FILE__, __LINE__, LOG_ARGS_(__VA_ARGS__, LOG_END));   \
	} while (0)
#define log_enabled(n) (log_verbosity >= (n))

/* Logs at error level and returns r (a negative errno), for `return log_error_errno(r, ...)`. */
#define log_error_errno(r, ...) (log_error(__VA_ARGS__, KV_E(r)), (r))

/* The plumbing of the macros above. LOG_ARGS_(msg, item..., LOG_END) gives "msg, kv" where kv is
 * a compound literal array of the items, each passed through LOG_KV_: a _Generic with the one
 * association struct log_kv, so that any other type has no match and fails to compile. */
#define LOG_MAX_ITEMS 24
#define LOG_KV_(x) _Generic((x), struct log_kv: (x))
#define LOG_ARGS_(msg, ...) (msg), (const struct log_kv[]){ LOG_MAP_(__VA_ARGS__) }
#define LOG_CAT_(a, b) LOG_CAT2_(a, b)
#define LOG_CAT2_(a, b) a##b
/* The number of its arguments (1 to 25), or TOO_MANY_ITEMS from 26 to 32. */
#define LOG_COUNT_(...)                                                                            \
	LOG_COUNT_N_(__VA_ARGS__, TOO_MANY_ITEMS, TOO_MANY_ITEMS, TOO_MANY_ITEMS, TOO_MANY_ITEMS,  \
		     TOO_MANY_ITEMS, TOO_MANY_ITEMS, TOO_MANY_ITEMS, 25, 24, 23, 22, 21, 20, 19,   \
		     18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define LOG_COUNT_N_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17,  \
		     _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, _30, _31, _32, N, \
		     ...)                                                                          \
	N
/* LOG_MAP_n(item...) passes each of n items (LOG_MAX_ITEMS and the LOG_END the macros add)
 * through LOG_KV_; with more, a static assertion fails. */
#define LOG_MAP_(...) LOG_CAT_(LOG_MAP_, LOG_COUNT_(__VA_ARGS__))(__VA_ARGS__)
#define LOG_MAP_TOO_MANY_ITEMS(...)                                                                \
	({                                                                                         \
		_Static_assert(0, "more than LOG_MAX_ITEMS items in one log call");                \
		LOG_END;                                                                           \
	})
#define LOG_MAP_1(x) LOG_KV_(x)
#define LOG_MAP_2(x, ...) LOG_KV_(x), LOG_MAP_1(__VA_ARGS__)
#define LOG_MAP_3(x, ...) LOG_KV_(x), LOG_MAP_2(__VA_ARGS__)
#define LOG_MAP_4(x, ...) LOG_KV_(x), LOG_MAP_3(__VA_ARGS__)
#define LOG_MAP_5(x, ...) LOG_KV_(x), LOG_MAP_4(__VA_ARGS__)
#define LOG_MAP_6(x, ...) LOG_KV_(x), LOG_MAP_5(__VA_ARGS__)
#define LOG_MAP_7(x, ...) LOG_KV_(x), LOG_MAP_6(__VA_ARGS__)
#define LOG_MAP_8(x, ...) LOG_KV_(x), LOG_MAP_7(__VA_ARGS__)
#define LOG_MAP_9(x, ...) LOG_KV_(x), LOG_MAP_8(__VA_ARGS__)
#define LOG_MAP_10(x, ...) LOG_KV_(x), LOG_MAP_9(__VA_ARGS__)
#define LOG_MAP_11(x, ...) LOG_KV_(x), LOG_MAP_10(__VA_ARGS__)
#define LOG_MAP_12(x, ...) LOG_KV_(x), LOG_MAP_11(__VA_ARGS__)
#define LOG_MAP_13(x, ...) LOG_KV_(x), LOG_MAP_12(__VA_ARGS__)
#define LOG_MAP_14(x, ...) LOG_KV_(x), LOG_MAP_13(__VA_ARGS__)
#define LOG_MAP_15(x, ...) LOG_KV_(x), LOG_MAP_14(__VA_ARGS__)
#define LOG_MAP_16(x, ...) LOG_KV_(x), LOG_MAP_15(__VA_ARGS__)
#define LOG_MAP_17(x, ...) LOG_KV_(x), LOG_MAP_16(__VA_ARGS__)
#define LOG_MAP_18(x, ...) LOG_KV_(x), LOG_MAP_17(__VA_ARGS__)
#define LOG_MAP_19(x, ...) LOG_KV_(x), LOG_MAP_18(__VA_ARGS__)
#define LOG_MAP_20(x, ...) LOG_KV_(x), LOG_MAP_19(__VA_ARGS__)
#define LOG_MAP_21(x, ...) LOG_KV_(x), LOG_MAP_20(__VA_ARGS__)
#define LOG_MAP_22(x, ...) LOG_KV_(x), LOG_MAP_21(__VA_ARGS__)
#define LOG_MAP_23(x, ...) LOG_KV_(x), LOG_MAP_22(__VA_ARGS__)
#define LOG_MAP_24(x, ...) LOG_KV_(x), LOG_MAP_23(__VA_ARGS__)
#define LOG_MAP_25(x, ...) LOG_KV_(x), LOG_MAP_24(__VA_ARGS__)

/* Copies src into dst (size n, always terminated), replacing secrets by "<redacted>". Values of
 * fields are redacted, never the words of a sentence:
 *   - key=value and "key": value (JSON) when the key names a secret (log_key_is_secret):
 *     "tokens=<redacted>", "X-Amz-Signature=<redacted>", "\"SecretAccessKey\":\"<redacted>\"";
 *   - "Key: value" (a header, a YAML key) only when Key is a field name that names a secret: a
 *     compound name (X-Amz-Security-Token, aws_secret_access_key, SessionToken) or one of token,
 *     password, passwd, secret, authorization; Authorization and long header names lose the
 *     rest of the line. A word of a sentence before ':' is left alone ("no usable AWS
 *     credentials: none configured");
 *   - the token after "Bearer " (not a short lower-case word: "Bearer token rejected" stays);
 *   - the userinfo of a URL ("https://user:<redacted>@host/", "https://<redacted>@host/" for a
 *     lone token).
 * Words with no value ("token expired", "secret not found") are never touched. Returns dst. */
char *log_redact(const char *src, char *dst, size_t n);
/* True if a field named `key` holds a secret (token, secret, password, key material...). */
bool log_key_is_secret(const char *key);

/* The name of an errno value ("ENOENT"), or "E?" for an unknown one. */
const char *errno_name(int e);
