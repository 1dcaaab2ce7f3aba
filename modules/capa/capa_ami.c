/* The AMI lookup (see capa_ami.h): DescribeInstanceTypes for the architecture, DescribeImages
 * with CAPA's filters for the image, both cached. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/xml.h"
#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "modules/capa/capa.h"
#include "modules/capa/capa_ami.h"
#include "modules/capa/capa_machine_ctl.h"

struct ami_entry {
	char key[640]; /* region NUL-separated parts, flattened with '|' */
	char value[CAPA_AMI_ID_MAX];
	int64_t expires;
};

/* One lock for the cache and the misses: a miss is looked up while it is held, so that the
 * workers asking for the same image wait for the first one's answer instead of asking too. */
static pthread_mutex_t ami_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ami_entry ami_cache[CAPA_AMI_CACHE_MAX];

void capa_ami_cache_clear(void)
{
	pthread_mutex_lock(&ami_lock);
	memset(ami_cache, 0, sizeof(ami_cache));
	pthread_mutex_unlock(&ami_lock);
}

/* Under the lock. */
static const char *cache_get(const char *key, int64_t now)
{
	for (size_t i = 0; i < CAPA_AMI_CACHE_MAX; i++)
		if (ami_cache[i].key[0] && ami_cache[i].expires > now &&
		    strcmp(ami_cache[i].key, key) == 0)
			return ami_cache[i].value;
	return NULL;
}

/* Under the lock: the slot of key, else a free or expired one, else the one expiring first. */
static void cache_put(const char *key, const char *value, int64_t now)
{
	struct ami_entry *e = &ami_cache[0];
	for (size_t i = 0; i < CAPA_AMI_CACHE_MAX; i++) {
		struct ami_entry *c = &ami_cache[i];
		if (strcmp(c->key, key) == 0 || !c->key[0] || c->expires <= now) {
			e = c;
			break;
		}
		if (c->expires < e->expires)
			e = c;
	}
	str_copy(e->key, sizeof(e->key), key);
	str_copy(e->value, sizeof(e->value), value);
	e->expires = now + CAPA_AMI_CACHE_NS;
}

int capa_ami_name(const char *format, const char *base_os, const char *version, char *out,
		  size_t n)
{
	static const char bos[] = "{{.BaseOS}}", kv[] = "{{.K8sVersion}}";
	struct buf b = BUF_INIT(1024);
	int r = 0;

	if (!version || !*version || (version[0] == 'v' && !version[1]))
		return -EINVAL;
	if (version[0] == 'v')
		version++;
	if (!format || !*format)
		format = CAPA_AMI_DEFAULT_FORMAT;
	if (!base_os || !*base_os)
		base_os = CAPA_AMI_DEFAULT_BASEOS;
	for (const char *p = format; *p && r >= 0;) {
		if (strncmp(p, bos, sizeof(bos) - 1) == 0) {
			r = buf_puts(&b, base_os);
			p += sizeof(bos) - 1;
		} else if (strncmp(p, kv, sizeof(kv) - 1) == 0) {
			r = buf_puts(&b, version);
			p += sizeof(kv) - 1;
		} else {
			r = buf_append(&b, p++, 1);
		}
	}
	if (r >= 0)
		r = buf_append(&b, "", 1);
	if (r >= 0)
		r = str_copy(out, n, b.data);
	buf_release(&b);
	return r < 0 ? (r == -ENOSPC || r == -E2BIG ? -ENAMETOOLONG : r) : 0;
}

/* A query of the cache: up to three arguments, the answer into out. */
typedef int (*ami_query_fn)(const struct capa_ami_caller *c, const char *a, const char *b,
			    const char *d, char *out, size_t n);

/* The cached answer of key, else fn's (kept when found). The lock is held across fn. */
static int cached(const struct capa_ami_caller *c, const char *key, ami_query_fn fn,
		  const char *a, const char *b, const char *d, char *out, size_t n)
{
	int r;

	pthread_mutex_lock(&ami_lock);
	const char *hit = cache_get(key, now_mono_ns());
	if (hit)
		r = str_copy(out, n, hit);
	else if ((r = fn(c, a, b, d, out, n)) >= 0)
		cache_put(key, out, now_mono_ns());
	pthread_mutex_unlock(&ami_lock);
	return r;
}

static int arch_query(const struct capa_ami_caller *c, const char *type, const char *unused1,
		      const char *unused2, char *out, size_t n)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	bool x86 = false, arm = false;
	int r = aws_query_add(&q, "InstanceType.1", type);

	if (r >= 0)
		r = c->fn(c->ud, "DescribeInstanceTypes", &q, &rep);
	aws_query_release(&q);
	if (r < 0)
		goto out;
	const xmlNode *it = aws_xml_list(rep.result, "instanceTypeSet");
	for (const xmlNode *a = aws_xml_list(it, "processorInfo/supportedArchitectures"); a;
	     a = aws_xml_next(a)) {
		const char *v = aws_xml_text(a, NULL);
		x86 |= v && strcmp(v, "x86_64") == 0;
		arm |= v && strcmp(v, "arm64") == 0;
	}
	if (!x86 && !arm) {
		str_printf(c->err, c->errlen,
			   "DescribeInstanceTypes: instance type \"%s\" is unknown or supports neither "
			   "x86_64 nor arm64",
			   type);
		r = -ENOENT;
		goto out;
	}
	r = str_copy(out, n, x86 ? "x86_64" : "arm64");
out:
	aws_reply_release(&rep);
	return r;
}

int capa_ami_arch(const struct capa_ami_caller *c, const char *instance_type, char *out, size_t n)
{
	char key[640];

	if (!instance_type || !*instance_type) {
		str_printf(c->err, c->errlen, "no instance type to find the architecture of");
		return -EINVAL;
	}
	if (str_printf(key, sizeof(key), "arch|%s|%s", c->region ? c->region : "",
		       instance_type) < 0)
		return -ENAMETOOLONG;
	return cached(c, key, arch_query, instance_type, NULL, NULL, out, n);
}

static int images_query(const struct capa_ami_caller *c, const char *owner, const char *name,
			const char *arch, char *out, size_t n)
{
	struct aws_query q = AWS_QUERY_INIT;
	struct aws_reply rep = {0};
	const char *best = NULL, *best_date = "";
	int r = aws_query_add_filter(&q, "owner-id", &owner, 1);

	if (r >= 0)
		r = aws_query_add_filter(&q, "name", &name, 1);
	if (r >= 0)
		r = aws_query_add_filter(&q, "architecture", &arch, 1);
	if (r >= 0)
		r = aws_query_add_filter(&q, "state", (const char *[]){"available"}, 1);
	if (r >= 0)
		r = aws_query_add_filter(&q, "virtualization-type", (const char *[]){"hvm"}, 1);
	if (r >= 0)
		r = c->fn(c->ud, "DescribeImages", &q, &rep);
	aws_query_release(&q);
	if (r < 0)
		goto out;
	/* the newest CreationDate wins (ISO 8601 in UTC: the text order is the time order) */
	for (const xmlNode *it = aws_xml_list(rep.result, "imagesSet"); it; it = aws_xml_next(it)) {
		const char *id = aws_xml_text(it, "imageId");
		const char *date = aws_xml_text(it, "creationDate");
		if (!id || !*id)
			continue;
		if (!date)
			date = "";
		if (!best || strcmp(date, best_date) > 0) {
			best = id;
			best_date = date;
		}
	}
	if (!best) {
		str_printf(c->err, c->errlen,
			   "no available hvm image of owner %s named \"%s\" for architecture %s", owner,
			   name, arch);
		r = -ENOENT;
		goto out;
	}
	r = str_copy(out, n, best);
	if (r >= 0)
		log_info("found the AMI", KV_S("owner", owner), KV_S("name", name),
			 KV_S("architecture", arch), KV_S("ami", out), KV_S("created", best_date));
out:
	aws_reply_release(&rep);
	return r;
}

int capa_ami_lookup(const struct capa_ami_caller *c, const char *owner, const char *name,
		    const char *arch, char *out, size_t n)
{
	char key[640];

	if (str_printf(key, sizeof(key), "ami|%s|%s|%s|%s", c->region ? c->region : "", owner,
		       name, arch) < 0) {
		str_printf(c->err, c->errlen, "the image name \"%.80s\" is too long", name);
		return -ENAMETOOLONG;
	}
	return cached(c, key, images_query, owner, name, arch, out, n);
}

/* The spec's string field, else the cluster's, else def. */
static const char *field(const cJSON *machine_spec, const cJSON *cluster_spec, const char *name,
			 const char *def)
{
	const char *v = json_str(machine_spec, name);
	if (!v || !*v)
		v = json_str(cluster_spec, name);
	return v && *v ? v : def;
}

int capa_ami_for_machine(const struct capa_ami_caller *c, const cJSON *machine_spec,
			 const cJSON *cluster_spec, const char *version, const char *instance_type,
			 char *out, size_t n)
{
	const char *org = field(machine_spec, cluster_spec, "imageLookupOrg", CAPA_AMI_DEFAULT_ORG);
	const char *fmt =
	    field(machine_spec, cluster_spec, "imageLookupFormat", CAPA_AMI_DEFAULT_FORMAT);
	const char *bos =
	    field(machine_spec, cluster_spec, "imageLookupBaseOS", CAPA_AMI_DEFAULT_BASEOS);
	char name[512], arch[16];
	int r;

	if (!version || !*version) {
		str_printf(c->err, c->errlen,
			   "no spec.ami.id and the Machine has no spec.version to look an AMI up by");
		return -EINVAL;
	}
	if ((r = capa_ami_name(fmt, bos, version, name, sizeof(name))) < 0) {
		str_printf(c->err, c->errlen, "cannot build the AMI name from \"%.80s\" and \"%.40s\"",
			   fmt, version);
		return r;
	}
	if ((r = capa_ami_arch(c, instance_type, arch, sizeof(arch))) < 0)
		return r;
	return capa_ami_lookup(c, org, name, arch, out, n);
}

static int mach_call(void *ud, const char *action, const struct aws_query *q,
		     struct aws_reply *rep)
{
	return capa_mach_ec2(ud, action, q, rep, 0);
}

int capa_mach_ami(struct capa_mscope *s, const cJSON *machine, char *out, size_t n)
{
	const char *id = json_str(s->m.spec, "ami.id");
	struct capa_ami_caller c = {.fn = mach_call, .ud = s, .region = s->region, .err = s->err,
				    .errlen = sizeof(s->err)};

	if (id && *id)
		return str_copy(out, n, id);
	return capa_ami_for_machine(&c, s->m.spec, json_find(s->m.awscluster, "spec"),
				    json_str(machine, "spec.version"),
				    json_str(s->m.spec, "instanceType"), out, n);
}
