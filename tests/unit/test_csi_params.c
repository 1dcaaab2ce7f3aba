/* CreateVolume parameters, sizes, IOPS, zones, tags and tokens of csi-controller. */
#include <stdlib.h>
#include <string.h>

#include "modules/csi-controller/csi_controller_internal.h"
#include "tests/unit/harness.h"

#define KV(k, v)                                                                                   \
	{                                                                                          \
		(char *)(k), (char *)(v)                                                           \
	}

static const char *ctx_get(const struct csi_vol_params *p, const char *k)
{
	for (size_t i = 0; i < p->n_ctx; i++)
		if (strcmp(p->ctx[i].key, k) == 0)
			return p->ctx[i].value;
	return NULL;
}

static const char *tag_get(const struct csi_vol_params *p, const char *k)
{
	for (size_t i = 0; i < p->n_tags; i++)
		if (strcmp(p->tags[i].key, k) == 0)
			return p->tags[i].value;
	return NULL;
}

TEST(csi_params_defaults_and_case_insensitive_keys)
{
	struct csi_vol_params p;
	char err[256];
	struct csi_kv kv[] = {KV("TYPE", "IO2"), KV("Iops", "5000"), KV("ENCRYPTED", "true"),
			      KV("csi.storage.k8s.io/FSType", "XFS"), KV("blocksize", "4096")};

	ASSERT_OK(csi_vol_params_parse(NULL, 0, NULL, &p, err, sizeof(err)));
	ASSERT_STREQ(p.type, "gp3");
	ASSERT_FALSE(p.encrypted);
	csi_vol_params_release(&p);

	ASSERT_OK(csi_vol_params_parse(kv, ARRAY_SIZE(kv), NULL, &p, err, sizeof(err)));
	ASSERT_STREQ(p.type, "io2");
	ASSERT_TRUE(p.iops_set);
	ASSERT_EQ(p.iops, 5000);
	ASSERT_TRUE(p.encrypted);
	ASSERT_STREQ(p.fstype, "xfs");
	ASSERT_STREQ(ctx_get(&p, "blockSize"), "4096");
	ASSERT_STREQ(ctx_get(&p, "csi.storage.k8s.io/fstype"), "xfs");
	csi_vol_params_release(&p);
}

TEST(csi_params_rejects_bad_input)
{
	struct csi_vol_params p;
	char err[256];
	struct {
		struct csi_kv kv[2];
		size_t n;
		const char *want;
	} cases[] = {
	    {{KV("size", "10")}, 1, "invalid parameter key size"},
	    {{KV("type", "gp9")}, 1, "unknown volume type"},
	    {{KV("iops", "100"), KV("iopsPerGB", "10")}, 2, "mutually exclusive"},
	    {{KV("iops", "-5")}, 1, "could not parse iops"},
	    {{KV("encrypted", "yes")}, 1, "want true or false"},
	    {{KV("fstype", "btrfs")}, 1, "unsupported fstype"},
	    {{KV("bytesPerInode", "4096"), KV("csi.storage.k8s.io/fstype", "xfs")},
	     2,
	     "not supported for fstype xfs"},
	    {{KV("ext4ClusterSize", "16384")}, 1, "needs ext4BigAlloc"},
	    {{KV("blockSize", "4k")}, 1, "positive decimal"},
	    {{KV("tagSpecification_1", "novalue")}, 1, "not key=value"},
	    {{KV("tagSpecification_1", "aws:x=1")}, 1, "reserved"},
	    {{KV("tagSpecification_1", "k={{ .Foo }}")}, 1, "cannot expand"},
	    {{KV("volumeInitializationRate", "50")}, 1, "100 to 300"},
	    {{KV("outpostArn", "arn:aws:outposts:us-west-2:123456789012:outpost/op-1\n;rm")},
	     1,
	     "outpostArn \"arn:aws:outposts:us-west-2:123456789012:outpost/op-1\\n;rm\" is "
	     "malformed"},
	    {{KV("outpostArn", "<html>")}, 1, "is malformed"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		memset(err, 0, sizeof(err));
		ASSERT_ERR(
		    csi_vol_params_parse(cases[i].kv, cases[i].n, NULL, &p, err, sizeof(err)),
		    EINVAL);
		ASSERT_CONTAINS(err, cases[i].want);
	}
	/* with --warn-on-invalid-tag a bad tag is skipped (a reserved key, a bad template); a
	 * value without "=" is an error all the same (upstream's template.Evaluate) */
	struct csi_tag_opts o = {.warn_on_invalid_tag = true};
	struct csi_kv bad_tag[] = {KV("tagSpecification_1", "CSIVolumeName=x"),
				   KV("tagSpecification_2", "a={{ .Nope }}")};
	ASSERT_OK(csi_vol_params_parse(bad_tag, 2, &o, &p, err, sizeof(err)));
	ASSERT_EQ(p.n_tags, 0);
	csi_vol_params_release(&p);
	struct csi_kv novalue[] = {KV("tagSpecification_1", "novalue")};
	ASSERT_ERR(csi_vol_params_parse(novalue, 1, &o, &p, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "is not key=value");
	/* only the value is a template: a key stays as written */
	struct csi_kv tmpl[] = {KV("csi.storage.k8s.io/pvc/name", "data"),
				KV("tagSpecification_1", "{{ .PVCName }}={{ .PVCName }}")};
	ASSERT_OK(csi_vol_params_parse(tmpl, 2, NULL, &p, err, sizeof(err)));
	bool found = false;
	for (size_t i = 0; i < p.n_tags; i++)
		found |= strcmp(p.tags[i].key, "{{ .PVCName }}") == 0 &&
			 strcmp(p.tags[i].value, "data") == 0;
	ASSERT_TRUE(found);
	csi_vol_params_release(&p);
	struct csi_kv outpost[] = {KV(
	    "outpostArn", "arn:aws:outposts:us-west-2:123456789012:outpost/op-0123456789abcdef0")};
	ASSERT_OK(csi_vol_params_parse(outpost, 1, NULL, &p, err, sizeof(err)));
	ASSERT_STREQ(p.outpost_arn, outpost[0].value);
	csi_vol_params_release(&p);
}

TEST(csi_params_tags_and_templates)
{
	struct csi_vol_params p;
	char err[256];
	struct csi_kv kv[] = {
	    KV("csi.storage.k8s.io/pvc/name", "data"),
	    KV("csi.storage.k8s.io/pvc/namespace", "prod"),
	    KV("csi.storage.k8s.io/pv/name", "pvc-123"),
	    KV("csi.storage.k8s.io/provisioner-secret-name", "x"),
	    KV("tagSpecification_1", "owner={{ .PVCNamespace }}/{{.PVCName}}"),
	    KV("TagSpecification_2", "team=storage=blue"),
	    KV("kmsKeyId", "arn:aws:kms:us-east-1:1:key/abc"),
	};

	ASSERT_OK(csi_vol_params_parse(kv, ARRAY_SIZE(kv), NULL, &p, err, sizeof(err)));
	ASSERT_STREQ(tag_get(&p, "kubernetes.io/created-for/pvc/name"), "data");
	ASSERT_STREQ(tag_get(&p, "kubernetes.io/created-for/pvc/namespace"), "prod");
	ASSERT_STREQ(tag_get(&p, "kubernetes.io/created-for/pv/name"), "pvc-123");
	ASSERT_STREQ(tag_get(&p, "owner"), "prod/data");
	ASSERT_STREQ(tag_get(&p, "team"), "storage=blue");
	ASSERT_TRUE(p.encrypted); /* a KMS key forces encryption */
	csi_vol_params_release(&p);
}

TEST(csi_params_size_rounding_and_limits)
{
	const struct csi_vol_type *gp3 = csi_vol_type_find("gp3"), *io2 = csi_vol_type_find("io2"),
				  *st1 = csi_vol_type_find("st1");
	long long gib = 0;
	struct csi_error err;

	ASSERT_EQ(csi_size_resolve(gp3, false, 0, 0, 0, &gib, &err), 0);
	ASSERT_EQ(gib, 100);
	ASSERT_EQ(csi_size_resolve(gp3, true, 1, 0, 0, &gib, &err), 0);
	ASSERT_EQ(gib, 1);
	ASSERT_EQ(csi_size_resolve(gp3, true, GIB + 1, 0, 0, &gib, &err), 0);
	ASSERT_EQ(gib, 2);
	ASSERT_EQ(csi_size_resolve(gp3, true, 10 * GIB, 10 * GIB, 0, &gib, &err), 0);
	ASSERT_EQ(gib, 10);
	/* rounding up past the limit */
	ASSERT_EQ(csi_size_resolve(gp3, true, GIB + 1, GIB + 100, 0, &gib, &err),
		  CSI_OUT_OF_RANGE);
	/* malformed ranges */
	ASSERT_EQ(csi_size_resolve(gp3, true, -1, 0, 0, &gib, &err),
		  CSI_INVALID_ARGUMENT);
	ASSERT_EQ(csi_size_resolve(gp3, true, 10 * GIB, 5 * GIB, 0, &gib, &err),
		  CSI_INVALID_ARGUMENT);
	/* per-type limits */
	ASSERT_EQ(csi_size_resolve(io2, true, 2 * GIB, 0, 0, &gib, &err),
		  CSI_OUT_OF_RANGE);
	ASSERT_CONTAINS(err.message, "io2 volumes must be 4 to 65536 GiB");
	ASSERT_EQ(csi_size_resolve(st1, true, 100 * GIB, 0, 0, &gib, &err),
		  CSI_OUT_OF_RANGE);
	ASSERT_EQ(csi_size_resolve(gp3, true, 70000 * GIB, 0, 0, &gib, &err),
		  CSI_OUT_OF_RANGE);
	/* the default follows the type's minimum and a source snapshot */
	ASSERT_EQ(csi_size_resolve(st1, false, 0, 0, 0, &gib, &err), 0);
	ASSERT_EQ(gib, 125);
	ASSERT_EQ(csi_size_resolve(gp3, false, 0, 0, 200, &gib, &err), 0);
	ASSERT_EQ(gib, 200);
	ASSERT_EQ(csi_size_resolve(gp3, false, 0, 0, 8, &gib, &err), 0);
	ASSERT_EQ(gib, 8); /* from a source: its size, not the 100 GiB default */
	ASSERT_EQ(csi_size_resolve(gp3, true, 50 * GIB, 0, 200, &gib, &err),
		  CSI_OUT_OF_RANGE);
	/* a limit under 100 GiB with no required size */
	ASSERT_EQ(csi_size_resolve(gp3, true, 0, 20 * GIB, 0, &gib, &err), 0);
	ASSERT_EQ(gib, 20);
}

TEST(csi_params_iops)
{
	const struct csi_vol_type *gp3 = csi_vol_type_find("gp3"), *io2 = csi_vol_type_find("io2"),
				  *io1 = csi_vol_type_find("io1"), *gp2 = csi_vol_type_find("gp2");
	struct csi_vol_params p = {0};
	long long iops = -1;
	char err[256];

	ASSERT_OK(csi_iops_resolve(gp3, &p, 10, &iops, err, sizeof(err)));
	ASSERT_EQ(iops, 0);
	ASSERT_ERR(csi_iops_resolve(io2, &p, 10, &iops, err, sizeof(err)),
		   EINVAL); /* io2 needs iops */
	p.iops_set = true;
	p.iops = 5000;
	ASSERT_OK(csi_iops_resolve(io2, &p, 10, &iops, err, sizeof(err)));
	ASSERT_EQ(iops, 5000);
	ASSERT_OK(csi_iops_resolve(io1, &p, 10, &iops, err, sizeof(err)));
	ASSERT_EQ(iops, 500); /* capped at 50/GiB */
	ASSERT_OK(csi_iops_resolve(gp3, &p, 1, &iops, err, sizeof(err)));
	ASSERT_EQ(iops, 3000); /* gp3's 500/GiB never goes under the 3000 baseline */
	p.iops = 1000;
	ASSERT_ERR(csi_iops_resolve(gp3, &p, 100, &iops, err, sizeof(err)), EINVAL);
	ASSERT_ERR(csi_iops_resolve(gp2, &p, 100, &iops, err, sizeof(err)), EINVAL);
	p.iops = 100000;
	ASSERT_OK(csi_iops_resolve(gp3, &p, 1000, &iops, err, sizeof(err)));
	ASSERT_EQ(iops, 80000);
	/* iopsPerGB: below the minimum needs allowAutoIOPSPerGBIncrease */
	p.iops_set = false;
	p.iops_per_gb_set = true;
	p.iops_per_gb = 10;
	ASSERT_ERR(csi_iops_resolve(io2, &p, 4, &iops, err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "allowAutoIOPSPerGBIncrease");
	p.auto_iops = true;
	ASSERT_OK(csi_iops_resolve(io2, &p, 4, &iops, err, sizeof(err)));
	ASSERT_EQ(iops, 100);
	ASSERT_OK(csi_iops_resolve(io2, &p, 200, &iops, err, sizeof(err)));
	ASSERT_EQ(iops, 2000);
	/* throughput */
	ASSERT_OK(csi_throughput_check(gp3, 125, 0, err, sizeof(err)));
	ASSERT_OK(csi_throughput_check(gp3, 750, 0, err, sizeof(err)));
	ASSERT_ERR(csi_throughput_check(gp3, 1000, 3000, err, sizeof(err)), EINVAL);
	ASSERT_OK(csi_throughput_check(gp3, 1000, 4000, err, sizeof(err)));
	ASSERT_ERR(csi_throughput_check(gp3, 100, 0, err, sizeof(err)), EINVAL);
	ASSERT_ERR(csi_throughput_check(io2, 200, 1000, err, sizeof(err)), EINVAL);
}

TEST(csi_params_zone_choice)
{
	const struct csi_kv s1[] = {{CSI_TOPOLOGY_ZONE_KEY, "us-east-1a"}},
			    s2[] = {{CSI_WELL_KNOWN_ZONE_KEY, "us-east-1b"}},
			    s3[] = {{CSI_ZONE_ID_KEY, "use1-az4"}};
	const struct csi_ctrl_topology t1 = {s1, 1}, t2 = {s2, 1}, t3 = {s3, 1};
	const struct csi_ctrl_topology requisite[] = {t1, t2}, preferred[] = {t2};
	struct csi_ctrl_topology_req req = {.requisite = requisite, .n_requisite = 2};
	const char *zid;

	ASSERT_NULL(csi_pick_zone(NULL, &zid));
	ASSERT_STREQ(csi_pick_zone(&req, &zid), "us-east-1a");
	req.n_preferred = 1;
	req.preferred = preferred;
	ASSERT_STREQ(csi_pick_zone(&req, &zid), "us-east-1b"); /* preferred first */
	ASSERT_TRUE(csi_zone_allowed(&req, "us-east-1a"));
	ASSERT_TRUE(csi_zone_allowed(&req, "us-east-1b"));
	ASSERT_FALSE(csi_zone_allowed(&req, "us-east-1c"));
	ASSERT_TRUE(csi_zone_allowed(NULL, "us-east-1c"));
	const struct csi_ctrl_topology only_id[] = {t3};
	struct csi_ctrl_topology_req r2 = {.requisite = only_id, .n_requisite = 1};
	ASSERT_NULL(csi_pick_zone(&r2, &zid));
	ASSERT_STREQ(zid, "use1-az4");
}

TEST(csi_params_client_token)
{
	char a[65], b[65], c[65], d[65];

	csi_client_token("pvc-1", "gp3|10", 1, a);
	csi_client_token("pvc-1", "gp3|10", 1, b);
	csi_client_token("pvc-1", "gp3|20", 1, c);
	csi_client_token("pvc-1", "gp3|10", 2, d);
	ASSERT_EQ(strlen(a), 64);
	ASSERT_STREQ(a, b);
	ASSERT_TRUE(strcmp(a, c) != 0);
	ASSERT_TRUE(strcmp(a, d) != 0);
}

/* upstream's validateExtraTags: lengths, the driver's own keys, kubernetes.io and aws: */
TEST(csi_params_tag_check_reserved)
{
	char err[256];
	char long_key[130];

	memset(long_key, 'k', 129);
	long_key[129] = 0;
	ASSERT_OK(csi_tag_check("Name", "x", err, sizeof(err)));
	ASSERT_OK(csi_tag_check("KubernetesCluster", "x", err, sizeof(err)));
	ASSERT_OK(csi_tag_check("team", "", err, sizeof(err)));
	ASSERT_ERR(csi_tag_check("", "x", err, sizeof(err)), EINVAL);
	ASSERT_ERR(csi_tag_check(long_key, "x", err, sizeof(err)), EINVAL);
	ASSERT_ERR(csi_tag_check("CSIVolumeName", "x", err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "reserved");
	ASSERT_ERR(csi_tag_check("CSIVolumeSnapshotName", "x", err, sizeof(err)), EINVAL);
	ASSERT_ERR(csi_tag_check("ebs.csi.aws.com/cluster", "x", err, sizeof(err)), EINVAL);
	ASSERT_ERR(csi_tag_check("kubernetes.io/cluster/x", "owned", err, sizeof(err)), EINVAL);
	ASSERT_CONTAINS(err, "kubernetes.io prefix");
	ASSERT_ERR(csi_tag_check("aws:foo", "x", err, sizeof(err)), EINVAL);
}
