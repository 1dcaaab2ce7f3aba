#include "common/base/secret.h"

#include <stdlib.h>
#include <string.h>

void secret_wipe(void *p, size_t n)
{
	if (p && n)
		explicit_bzero(p, n);
}

void secret_wipe_str(char *s)
{
	if (s)
		explicit_bzero(s, strlen(s));
}

void secret_free(char *s)
{
	secret_wipe_str(s);
	free(s);
}

void secret_freep(char **s)
{
	if (s) {
		secret_free(*s);
		*s = NULL;
	}
}
