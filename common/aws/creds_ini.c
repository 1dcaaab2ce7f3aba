/* The shared config and credentials files (~/.aws/config, ~/.aws/credentials): a small INI
 * reader with the AWS rules: "[profile NAME]" in the config file, "#" and ";" comments (full
 * line, or after white space), "key = value" with white space trimmed, indented lines under a
 * "key =" with no value are sub-settings (as for "s3 =") and are skipped. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/aws/creds.h"
#include "common/base/buf.h"
#include "common/base/secret.h"

#define INI_MAX_SIZE ((size_t)1 << 20)
#define INI_MAX_KEYS 4096

struct ini_entry {
	char *section;
	char *key;
	char *value;
};

struct aws_ini {
	struct ini_entry *e;
	size_t n, cap;
};

void aws_ini_free(struct aws_ini *ini)
{
	if (!ini)
		return;
	for (size_t i = 0; i < ini->n; i++) {
		free(ini->e[i].section);
		free(ini->e[i].key);
		if (ini->e[i].value) {
			secret_wipe_str(ini->e[i].value);
			free(ini->e[i].value);
		}
	}
	free(ini->e);
	free(ini);
}

static char *dup_range(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

static void trim(const char **s, size_t *n)
{
	while (*n && isspace((unsigned char)**s)) {
		(*s)++;
		(*n)--;
	}
	while (*n && isspace((unsigned char)(*s)[*n - 1]))
		(*n)--;
}

/* Sets key in section (a later value replaces an earlier one). */
static int ini_set(struct aws_ini *ini, const char *section, const char *k, size_t kn,
		   const char *v, size_t vn)
{
	char *key = dup_range(k, kn), *val = dup_range(v, vn);

	if (!key || !val) {
		free(key);
		free(val);
		return -ENOMEM;
	}
	for (char *p = key; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	for (size_t i = 0; i < ini->n; i++) {
		if (strcmp(ini->e[i].section, section) == 0 && strcmp(ini->e[i].key, key) == 0) {
			free(key);
			secret_wipe_str(ini->e[i].value);
			free(ini->e[i].value);
			ini->e[i].value = val;
			return 0;
		}
	}
	if (ini->n >= INI_MAX_KEYS) {
		free(key);
		free(val);
		return -E2BIG;
	}
	if (ini->n == ini->cap) {
		size_t ncap = ini->cap ? ini->cap * 2 : 8;
		struct ini_entry *ne = realloc(ini->e, ncap * sizeof(*ne));
		if (!ne) {
			free(key);
			free(val);
			return -ENOMEM;
		}
		ini->e = ne;
		ini->cap = ncap;
	}
	ini->e[ini->n].section = strdup(section);
	if (!ini->e[ini->n].section) {
		free(key);
		free(val);
		return -ENOMEM;
	}
	ini->e[ini->n].key = key;
	ini->e[ini->n].value = val;
	ini->n++;
	return 0;
}

int aws_ini_parse(const char *text, size_t len, bool config_style, struct aws_ini **ret)
{
	struct aws_ini *ini = calloc(1, sizeof(*ini));
	char section[256] = "";
	bool in_section = false, in_subsection = false;
	size_t pos = 0;
	int r = 0;

	if (!ini)
		return -ENOMEM;
	if (len > INI_MAX_SIZE) {
		aws_ini_free(ini);
		return -EMSGSIZE;
	}
	while (pos < len) {
		const char *line = text + pos, *eol = memchr(line, '\n', len - pos);
		size_t n = eol ? (size_t)(eol - line) : len - pos;
		bool indented = n > 0 && (line[0] == ' ' || line[0] == '\t');
		const char *eq;

		pos += n + (eol ? 1 : 0);
		trim(&line, &n);
		if (n == 0 || line[0] == '#' || line[0] == ';')
			continue;
		if (line[0] == '[') {
			const char *close = memchr(line, ']', n);
			const char *name = line + 1;
			size_t nn;
			if (!close) {
				in_section = false;
				continue;
			}
			nn = (size_t)(close - name);
			trim(&name, &nn);
			if (config_style && nn > 8 && strncmp(name, "profile", 7) == 0 &&
			    isspace((unsigned char)name[7])) {
				name += 8;
				nn -= 8;
				trim(&name, &nn);
			} else if (config_style && !(nn == 7 && strncmp(name, "default", 7) == 0)) {
				/* [sso-session x], [services x] and others: keep them apart */
				if (nn + 1 < sizeof(section)) {
					section[0] = '\x01';
					memcpy(section + 1, name, nn);
					section[nn + 1] = 0;
					in_section = true;
				}
				in_subsection = false;
				continue;
			}
			in_section = nn > 0 && nn < sizeof(section);
			if (in_section) {
				memcpy(section, name, nn);
				section[nn] = 0;
			}
			in_subsection = false;
			continue;
		}
		if (!in_section)
			continue;
		if (indented && in_subsection)
			continue;
		eq = memchr(line, '=', n);
		if (!eq)
			continue;
		{
			const char *k = line, *v = eq + 1;
			size_t kn = (size_t)(eq - line), vn = n - kn - 1;
			trim(&k, &kn);
			/* an inline comment needs white space before it */
			for (size_t i = 1; i < vn; i++) {
				if ((v[i] == '#' || v[i] == ';') &&
				    isspace((unsigned char)v[i - 1])) {
					vn = i;
					break;
				}
			}
			trim(&v, &vn);
			if (kn == 0)
				continue;
			in_subsection = vn == 0;
			if (vn == 0)
				continue;
			if ((r = ini_set(ini, section, k, kn, v, vn)) < 0) {
				aws_ini_free(ini);
				return r;
			}
		}
	}
	*ret = ini;
	return 0;
}

int aws_ini_load(const char *path, bool config_style, struct aws_ini **ret)
{
	FILE *f;
	struct buf b = BUF_INIT(INI_MAX_SIZE);
	char chunk[4096];
	size_t n;
	int r = 0;

	f = fopen(path, "re");
	if (!f)
		return -errno;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if ((r = buf_append(&b, chunk, n)) < 0)
			break;
	if (r == 0 && ferror(f))
		r = -EIO;
	fclose(f);
	if (r == 0)
		r = aws_ini_parse(b.data ? b.data : "", b.len, config_style, ret);
	if (b.data)
		secret_wipe(b.data, b.len);
	buf_release(&b);
	return r;
}

const char *aws_ini_get(const struct aws_ini *ini, const char *section, const char *key)
{
	for (size_t i = 0; ini && i < ini->n; i++)
		if (strcmp(ini->e[i].section, section) == 0 && strcasecmp(ini->e[i].key, key) == 0)
			return ini->e[i].value;
	return NULL;
}

bool aws_ini_has_section(const struct aws_ini *ini, const char *section)
{
	for (size_t i = 0; ini && i < ini->n; i++)
		if (strcmp(ini->e[i].section, section) == 0)
			return true;
	return false;
}

const char *aws_profile_name(const char *profile)
{
	const char *p = profile && *profile ? profile : getenv("AWS_PROFILE");

	return p && *p ? p : "default";
}

/* ~/.aws/<name>, or the environment's override. */
static int shared_path(const char *env, const char *name, char *out, size_t n)
{
	const char *v = getenv(env), *home;

	if (v && *v) {
		if (v[0] == '~' && v[1] == '/' && (home = getenv("HOME")))
			return str_printf(out, n, "%s%s", home, v + 1);
		return str_copy(out, n, v);
	}
	home = getenv("HOME");
	if (!home || !*home)
		return -ENOENT;
	return str_printf(out, n, "%s/.aws/%s", home, name);
}

int aws_profile_get(const char *profile, const char *key, char **ret)
{
	const char *name = aws_profile_name(profile);
	char path[4096];
	struct aws_ini *ini = NULL;
	const char *v = NULL;
	char *copy = NULL;

	if (shared_path("AWS_SHARED_CREDENTIALS_FILE", "credentials", path, sizeof(path)) >= 0 &&
	    aws_ini_load(path, false, &ini) >= 0) {
		v = aws_ini_get(ini, name, key);
		if (v)
			copy = strdup(v);
		aws_ini_free(ini);
		ini = NULL;
		if (v)
			goto found;
	}
	if (shared_path("AWS_CONFIG_FILE", "config", path, sizeof(path)) >= 0 &&
	    aws_ini_load(path, true, &ini) >= 0) {
		v = aws_ini_get(ini, name, key);
		if (v)
			copy = strdup(v);
		aws_ini_free(ini);
		if (v)
			goto found;
	}
	return -ENOENT;
found:
	if (!copy)
		return -ENOMEM;
	*ret = copy;
	return 0;
}
