/* Secrets in memory: wipe them before the memory is freed or reused, in a way the compiler
 * cannot optimise away (a plain memset before free() is a dead store it may drop).
 *
 *   secret_wipe(key, sizeof(key));          // a fixed buffer on the stack
 *   secret_wipe(b.data, b.len);             // a struct buf that held a reply with a token
 *   secret_free(c->token);                  // a malloc'd string: wiped up to its NUL, freed
 *   secret_freep(&c->secret_key);           // the same, and the pointer set to NULL
 *   _cleanup_secret_ char *tok = NULL;      // secret_freep at the end of the scope
 *
 * Every function accepts NULL. */
#pragma once
#include <stddef.h>

/* Zeroes n bytes at p (explicit_bzero). */
void secret_wipe(void *p, size_t n);
/* Zeroes a NUL-terminated string up to its terminator; the memory stays allocated. */
void secret_wipe_str(char *s);
/* secret_wipe_str(s), then free(s). */
void secret_free(char *s);
/* secret_free(*s), then *s = NULL. */
void secret_freep(char **s);
#define _cleanup_secret_ __attribute__((cleanup(secret_freep)))
