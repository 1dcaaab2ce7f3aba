/* Growable byte buffers with a hard size cap, and small string helpers.
 * A buffer's data is always NUL-terminated (the NUL is not counted in len). Appending past
 * max fails with -EMSGSIZE and leaves the buffer as it was. */
#pragma once
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max; /* hard cap on len; 0 means BUF_DEFAULT_MAX */
};

#define BUF_DEFAULT_MAX ((size_t)64 << 20)
#define BUF_INIT(m) { .data = NULL, .len = 0, .cap = 0, .max = (m) }

void buf_init(struct buf *b, size_t max);
void buf_release(struct buf *b); /* frees the data, keeps max */
void buf_reset(struct buf *b);   /* len = 0, keeps the memory */
int buf_reserve(struct buf *b, size_t extra);
int buf_append(struct buf *b, const void *data, size_t len);
int buf_puts(struct buf *b, const char *s);
int buf_putc(struct buf *b, char c);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap);
/* Drops the first n bytes. */
void buf_consume(struct buf *b, size_t n);
/* Hands the data to the caller (who frees it) and empties the buffer; never NULL on success. */
char *buf_steal(struct buf *b);
/* Appends s with every byte outside A-Z a-z 0-9 - _ . ~ percent-encoded (RFC 3986, uppercase
 * hex, as SigV4 needs); with keep_slash, '/' is kept as it is. */
int buf_put_urlencoded(struct buf *b, const char *s, size_t len, bool keep_slash);

/* Bounded copy: always terminates; returns -ENAMETOOLONG if src did not fit. */
int str_copy(char *dst, size_t n, const char *src);
/* snprintf that returns -ENAMETOOLONG on truncation and the length otherwise. */
int str_printf(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool str_has_prefix(const char *s, const char *prefix);
bool str_has_suffix(const char *s, const char *suffix);
/* Parses a whole decimal integer within [min, max]; -EINVAL or -ERANGE. */
int str_to_ll(const char *s, long long min, long long max, long long *ret);
int str_to_double(const char *s, double *ret);
/* Parses "true/false/1/0/yes/no/on/off" (any case). */
int str_to_bool(const char *s, bool *ret);
/* Frees a NULL-terminated vector of strings and the vector. */
void strv_free(char **v);
size_t strv_len(char *const *v);
/* Appends a copy of s to the NULL-terminated vector *v. */
int strv_push(char ***v, const char *s);
bool strv_contains(char *const *v, const char *s);
/* Splits s at sep into a new vector (empty fields dropped, fields trimmed). */
int strv_split(const char *s, char sep, char ***ret);
/* Constant-time comparison for secrets. */
bool str_equal_ct(const char *a, const char *b);
/* Removes leading and trailing white space in place; returns s. */
char *str_strip(char *s);

static inline void freep(void *p)
{
	extern void free(void *);
	free(*(void **)p);
}
#define _cleanup_free_ __attribute__((cleanup(freep)))
static inline void buf_releasep(struct buf *b)
{
	buf_release(b);
}
#define _cleanup_buf_ __attribute__((cleanup(buf_releasep)))
static inline void strv_freep(char ***v)
{
	strv_free(*v);
}
#define _cleanup_strv_ __attribute__((cleanup(strv_freep)))
/* Takes ownership out of a cleanup variable. */
#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) take_ = (p);                                                         \
		(p) = NULL;                                                                        \
		take_;                                                                             \
	})
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
