#include "common/base/log.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

_Atomic int log_verbosity;
_Atomic enum log_format log_format = LOG_FORMAT_TEXT;
long long log_flag_v;
char *log_flag_format;
static int log_fd = STDERR_FILENO;

#define LOG_LINE_MAX 8192
#define LOG_VALUE_MAX 4096

int log_apply_flags(void)
{
	if (log_flag_v < 0 || log_flag_v > 10)
		return -ERANGE;
	log_verbosity = (int)log_flag_v;
	if (!log_flag_format || strcmp(log_flag_format, "text") == 0)
		log_format = LOG_FORMAT_TEXT;
	else if (strcmp(log_flag_format, "json") == 0)
		log_format = LOG_FORMAT_JSON;
	else
		return -EINVAL;
	return 0;
}

void log_set_output(int fd)
{
	log_fd = fd;
}

bool log_key_is_secret(const char *key)
{
	static const char *const words[] = { "token", "secret", "password", "passwd", "authorization",
					     "signature", "privatekey", "private_key", "private-key",
					     "credential", NULL };
	static const char *const harmless[] = { "file", "path", "ttl", "expir", "url", "endpoint",
						"type", "length", NULL };
	char low[128];
	size_t n = 0;

	if (!key)
		return false;
	for (; n < sizeof(low) - 1 && key[n]; n++)
		low[n] = (char)tolower((unsigned char)key[n]);
	low[n] = 0;
	for (int i = 0; harmless[i]; i++)
		if (strstr(low, harmless[i]))
			return false;
	for (int i = 0; words[i]; i++)
		if (strstr(low, words[i]))
			return true;
	return false;
}

static bool is_word_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '-';
}

/* Does the word src[start..end) name a secret whose value follows? */
static bool word_is_secret(const char *w, size_t len)
{
	char key[128];

	if (len >= sizeof(key))
		return false;
	memcpy(key, w, len);
	key[len] = 0;
	return log_key_is_secret(key);
}

/* Is the word before an unquoted ':' the name of a field ("password: x", "X-Amz-Security-Token:
 * x", "SessionToken: x") rather than a word of a sentence ("no usable AWS credentials: none
 * configured")? A field name is compound (a '-' or '_', or a capital letter inside it) or one of
 * the few bare names a header or a YAML key uses. */
static bool word_is_field(const char *w, size_t len)
{
	static const char *const bare[] = { "token", "password", "passwd", "secret",
					    "authorization", NULL };

	for (size_t k = 0; k < len; k++)
		if (w[k] == '-' || w[k] == '_' || (k > 0 && isupper((unsigned char)w[k])))
			return true;
	for (int b = 0; bare[b]; b++)
		if (strlen(bare[b]) == len && strncasecmp(w, bare[b], len) == 0)
			return true;
	return false;
}

/* Is the word after "Bearer " a word of a sentence ("Bearer token rejected")? A token is long, or
 * holds a digit, a capital or punctuation. */
static bool word_is_prose(const char *w, size_t len)
{
	if (len == 0 || len >= 20)
		return false;
	for (size_t k = 0; k < len; k++)
		if (w[k] < 'a' || w[k] > 'z')
			return false;
	return true;
}

char *log_redact(const char *src, char *dst, size_t n)
{
	static const char redacted[] = "<redacted>";
	size_t o = 0, i = 0;

	if (n == 0)
		return dst;
#define PUT(c)                                                                                     \
	do {                                                                                       \
		if (o + 1 < n)                                                                     \
			dst[o++] = (c);                                                            \
	} while (0)
	while (src && src[i]) {
		if (src[i] == ':' && src[i + 1] == '/' && src[i + 2] == '/') {
			/* a URL's userinfo: "scheme://user:password@host" keeps the user */
			size_t a = i + 3, end = a, at = 0, colon = 0;
			while (src[end] && !strchr("/?#\"' \t\r\n<>", src[end])) {
				if (src[end] == '@')
					at = end;
				else if (src[end] == ':' && !colon && !at)
					colon = end;
				end++;
			}
			for (size_t k = i; k < a; k++)
				PUT(src[k]);
			i = a;
			if (!at)
				continue;
			/* "user:password@" keeps "user:"; a lone "token@" is all secret */
			if (colon && colon < at)
				for (; i <= colon; i++)
					PUT(src[i]);
			for (const char *r = redacted; *r; r++)
				PUT(*r);
			i = at;
			continue;
		}
		if (!is_word_char(src[i]) || (i > 0 && is_word_char(src[i - 1]))) {
			PUT(src[i]);
			i++;
			continue;
		}
		size_t ws = i;
		while (is_word_char(src[i]))
			i++;
		size_t wl = i - ws;
		for (size_t k = ws; k < i; k++)
			PUT(src[k]);
		if (wl == 6 && strncasecmp(src + ws, "bearer", 6) == 0 && src[i] == ' ') {
			size_t te = i + 1;
			while (src[te] && !isspace((unsigned char)src[te]) && src[te] != '"' &&
			       src[te] != ',')
				te++;
			if (word_is_prose(src + i + 1, te - i - 1))
				continue;
			PUT(' ');
			for (const char *r = redacted; *r; r++)
				PUT(*r);
			i = te;
			continue;
		}
		if (!word_is_secret(src + ws, wl))
			continue;
		/* key, then optional quote and spaces, then ':' or '=', then the value */
		size_t j = i;
		bool quoted_key = src[j] == '"';
		if (quoted_key)
			j++;
		while (src[j] == ' ')
			j++;
		if (src[j] != ':' && src[j] != '=')
			continue;
		bool header = src[j] == ':' && !quoted_key;
		if (header && !word_is_field(src + ws, wl))
			continue;
		j++;
		while (src[j] == ' ')
			j++;
		for (size_t k = i; k < j; k++)
			PUT(src[k]);
		i = j;
		char quote = 0;
		if (src[i] == '"' || src[i] == '\'') {
			quote = src[i];
			PUT(src[i]);
			i++;
		}
		for (const char *r = redacted; *r; r++)
			PUT(*r);
		if (quote) {
			while (src[i] && src[i] != quote) {
				if (src[i] == '\\' && src[i + 1])
					i++;
				i++;
			}
		} else if (header &&
			   (strncasecmp(src + ws, "authorization", 13) == 0 || wl > 13)) {
			while (src[i] && src[i] != '\n' && src[i] != '\r')
				i++;
		} else {
			while (src[i] && !isspace((unsigned char)src[i]) && src[i] != '&' &&
			       src[i] != ',' && src[i] != ';' && src[i] != '"' && src[i] != '}')
				i++;
		}
	}
#undef PUT
	dst[o] = 0;
	return dst;
}

const char *errno_name(int e)
{
	if (e < 0)
		e = -e;
	const char *s = strerrorname_np(e);
	return s ? s : "E?";
}

struct line {
	char buf[LOG_LINE_MAX];
	size_t len;
};

static void line_putc(struct line *l, char c)
{
	if (l->len < sizeof(l->buf) - 2)
		l->buf[l->len++] = c;
}

static void line_puts(struct line *l, const char *s)
{
	while (*s)
		line_putc(l, *s++);
}

static void line_printf(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line_printf(struct line *l, const char *fmt, ...)
{
	va_list ap;
	size_t room = sizeof(l->buf) - 2 - l->len;

	va_start(ap, fmt);
	int r = vsnprintf(l->buf + l->len, room + 1, fmt, ap);
	va_end(ap);
	if (r > 0)
		l->len += (size_t)r < room ? (size_t)r : room;
}

/* A quoted string, escaped as Go's %q and JSON both accept. */
static void line_quote(struct line *l, const char *s)
{
	char clean[LOG_VALUE_MAX];

	log_redact(s ? s : "", clean, sizeof(clean));
	line_putc(l, '"');
	for (const unsigned char *p = (const unsigned char *)clean; *p; p++) {
		switch (*p) {
		case '"':
			line_puts(l, "\\\"");
			break;
		case '\\':
			line_puts(l, "\\\\");
			break;
		case '\n':
			line_puts(l, "\\n");
			break;
		case '\r':
			line_puts(l, "\\r");
			break;
		case '\t':
			line_puts(l, "\\t");
			break;
		default:
			if (*p < 0x20)
				line_printf(l, "\\u%04x", *p);
			else
				line_putc(l, (char)*p);
		}
	}
	line_putc(l, '"');
}

static void line_value(struct line *l, const struct log_kv *kv)
{
	switch (kv->type) {
	case LOG_KV_STR:
		if (log_key_is_secret(kv->key))
			line_quote(l, "<redacted>");
		else
			line_quote(l, kv->s ? kv->s : "<nil>");
		break;
	case LOG_KV_INT:
		line_printf(l, "%lld", kv->i);
		break;
	case LOG_KV_UINT:
		line_printf(l, "%llu", kv->u);
		break;
	case LOG_KV_DOUBLE:
		line_printf(l, "%g", kv->d);
		break;
	case LOG_KV_BOOL:
		line_puts(l, kv->b ? "true" : "false");
		break;
	case LOG_KV_ERR: {
		char msg[160];
		snprintf(msg, sizeof(msg), "%s (%s)", strerror(kv->err < 0 ? -kv->err : kv->err),
			 errno_name(kv->err));
		line_quote(l, msg);
		break;
	}
	case LOG_KV_END:
		break;
	}
}

void log_emit(enum log_level level, const char *file, int line, const char *msg,
	      const struct log_kv *kv)
{
	struct line l = { .len = 0 };
	struct timeval tv;
	struct tm tm;
	const char *base = strrchr(file, '/');
	int saved_errno = errno;
	enum log_format format = log_format; /* one format for the whole line */

	base = base ? base + 1 : file;
	gettimeofday(&tv, NULL);
	if (format == LOG_FORMAT_JSON) {
		line_printf(&l, "{\"ts\":%.3f,\"caller\":\"%s:%d\",\"msg\":",
			    (double)tv.tv_sec * 1000.0 + (double)tv.tv_usec / 1000.0, base, line);
		line_quote(&l, msg);
		if (level == LOG_INFO)
			line_printf(&l, ",\"v\":%d", 0);
	} else {
		localtime_r(&tv.tv_sec, &tm);
		line_printf(&l, "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] ", (char)level,
			    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			    (long)tv.tv_usec, (int)gettid(), base, line);
		line_quote(&l, msg);
	}
	for (; kv && kv->type != LOG_KV_END; kv++) {
		if (format == LOG_FORMAT_JSON) {
			line_putc(&l, ',');
			line_quote(&l, kv->key);
			line_putc(&l, ':');
		} else {
			line_putc(&l, ' ');
			line_puts(&l, kv->key);
			line_putc(&l, '=');
		}
		line_value(&l, kv);
	}
	if (format == LOG_FORMAT_JSON)
		line_putc(&l, '}');
	l.buf[l.len++] = '\n';
	ssize_t w = write(log_fd, l.buf, l.len);
	(void)w;
	errno = saved_errno;
}
