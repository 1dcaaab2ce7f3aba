/* The node's EBS NVMe metrics (modules/csi-node/csi_node_nvme.c): the log page's parser on the
 * page tests/data/csi_node/ebs_nvme_page.bin (built from the documented layout by
 * make_nvme_page.py there, not recorded from a device), malformed pages, the histograms as
 * Prometheus buckets, and the collector over a by-id directory with a page source in the test. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/metrics/metrics.h"
#include "modules/csi-node/csi_node_nvme.h"
#include "tests/unit/harness.h"

static unsigned char *good_page(size_t *ret_len)
{
	return (unsigned char *)test_read_file(test_data("csi_node/ebs_nvme_page.bin"), ret_len);
}

TEST(csi_nvme_parse_good_page)
{
	size_t len;
	_cleanup_free_ unsigned char *p = good_page(&len);
	struct csi_nvme_stats st;

	ASSERT_NOT_NULL(p);
	ASSERT_EQ(len, CSI_NVME_PAGE_SIZE);
	ASSERT_OK(csi_nvme_parse(p, len, &st));
	ASSERT_EQ(st.read_ops, 1000);
	ASSERT_EQ(st.write_ops, 2000);
	ASSERT_EQ(st.read_bytes, 4096000);
	ASSERT_EQ(st.write_bytes, 8192000);
	ASSERT_EQ(st.read_time_us, 1500000);
	ASSERT_EQ(st.write_time_us, 3250000);
	ASSERT_EQ(st.ebs_iops_exceeded_us, 250000);
	ASSERT_EQ(st.ebs_tp_exceeded_us, 125000);
	ASSERT_EQ(st.ec2_iops_exceeded_us, 500000);
	ASSERT_EQ(st.ec2_tp_exceeded_us, 2000000);
	ASSERT_EQ(st.queue_length, 7);
	ASSERT_EQ(st.read_latency.n, 4);
	ASSERT_EQ(st.read_latency.bin[1].lower, 1000);
	ASSERT_EQ(st.read_latency.bin[1].upper, 2000);
	ASSERT_EQ(st.read_latency.bin[1].count, 300);
	ASSERT_EQ(st.write_latency.n, 3);
	ASSERT_EQ(st.write_latency.bin[2].upper, 1000000);
	ASSERT_EQ(st.write_latency.bin[2].count, 100);
	/* exactly the used part is enough */
	ASSERT_OK(csi_nvme_parse(p, CSI_NVME_PAGE_USED, &st));
}

TEST(csi_nvme_parse_wrong_magic)
{
	size_t len;
	_cleanup_free_ unsigned char *p = good_page(&len);
	struct csi_nvme_stats st;

	ASSERT_NOT_NULL(p);
	p[0] ^= 1;
	ASSERT_ERR(csi_nvme_parse(p, len, &st), EBADMSG);
	p[0] ^= 1;
	p[4] = 1; /* the magic is a whole u64: high bytes count */
	ASSERT_ERR(csi_nvme_parse(p, len, &st), EBADMSG);
	memset(p, 0, len); /* a page of zeros, as a device without the page may give */
	ASSERT_ERR(csi_nvme_parse(p, len, &st), EBADMSG);
}

TEST(csi_nvme_parse_short)
{
	size_t len;
	_cleanup_free_ unsigned char *p = good_page(&len);
	struct csi_nvme_stats st;

	ASSERT_NOT_NULL(p);
	ASSERT_ERR(csi_nvme_parse(p, CSI_NVME_PAGE_USED - 1, &st), EMSGSIZE);
	ASSERT_ERR(csi_nvme_parse(p, 8, &st), EMSGSIZE);
	ASSERT_ERR(csi_nvme_parse(p, 0, &st), EMSGSIZE);
	ASSERT_ERR(csi_nvme_parse(NULL, len, &st), EMSGSIZE);
}

TEST(csi_nvme_parse_bad_histograms)
{
	size_t len;
	_cleanup_free_ unsigned char *p = good_page(&len);
	struct csi_nvme_stats st;

	ASSERT_NOT_NULL(p);
	p[512] = 65; /* read histogram: more bins than the page has */
	ASSERT_ERR(csi_nvme_parse(p, len, &st), EBADMSG);
	p[512] = 64; /* all 64 in use: the unused zero bins no longer ascend */
	ASSERT_ERR(csi_nvme_parse(p, len, &st), EBADMSG);
	p[512] = 4;
	/* write histogram (at 2056): bin 1's upper bound (at 2056 + 8 + 24 + 8) below bin 0's */
	p[2056 + 8 + 24 + 8] = 0x10;
	p[2056 + 8 + 24 + 9] = 0;
	ASSERT_ERR(csi_nvme_parse(p, len, &st), EBADMSG);
}

TEST(csi_nvme_hist_buckets_cumulative)
{
	size_t len;
	_cleanup_free_ unsigned char *p = good_page(&len);
	struct csi_nvme_stats st;
	double le[CSI_NVME_HIST_BINS];
	uint64_t cum[CSI_NVME_HIST_BINS], count;

	ASSERT_NOT_NULL(p);
	ASSERT_OK(csi_nvme_parse(p, len, &st));
	ASSERT_EQ(csi_nvme_hist_buckets(&st.read_latency, le, cum, &count), 4);
	ASSERT_TRUE(le[0] == 0.001 && le[1] == 0.002 && le[2] == 0.005 && le[3] == 0.01);
	ASSERT_EQ(cum[0], 600);
	ASSERT_EQ(cum[1], 900);
	ASSERT_EQ(cum[2], 990);
	ASSERT_EQ(cum[3], 1000);
	ASSERT_EQ(count, 1000);
	ASSERT_EQ(csi_nvme_hist_buckets(&st.write_latency, le, cum, &count), 3);
	ASSERT_TRUE(le[0] == 0.0005 && le[1] == 0.0025 && le[2] == 1);
	ASSERT_EQ(cum[2], 2000);
	/* no bins: only the count (0) */
	struct csi_nvme_hist empty = {0};
	ASSERT_EQ(csi_nvme_hist_buckets(&empty, le, cum, &count), 0);
	ASSERT_EQ(count, 0);
	/* counts that overflow */
	struct csi_nvme_hist big = {.n = 2, .bin = {{0, 1, UINT64_MAX}, {1, 2, 1}}};
	ASSERT_ERR(csi_nvme_hist_buckets(&big, le, cum, &count), EOVERFLOW);
}

/* ---- the collector ---- */

static struct {
	unsigned char page[CSI_NVME_PAGE_SIZE];
	size_t len;
	int calls;
} src;

/* vol-0000000000000000a answers the page; vol-0000000000000000b a page with a bad magic. */
static ssize_t fake_read(void *ud, const char *device, const char *volume_id, void *buf, size_t cap)
{
	src.calls++;
	if (strcmp(volume_id, "vol-0000000000000000a") == 0) {
		memcpy(buf, src.page, src.len);
		return (ssize_t)src.len;
	}
	if (strcmp(volume_id, "vol-0000000000000000b") == 0) {
		memcpy(buf, src.page, src.len);
		((unsigned char *)buf)[0] = 0;
		return (ssize_t)src.len;
	}
	return -EOPNOTSUPP;
}

/* Two block devices for the links (any: they are never opened here), or NULL. */
static bool two_block_devices(const char **a, const char **b)
{
	static const char *const cands[] = {"/dev/loop0", "/dev/loop1", "/dev/loop2",
					    "/dev/loop3", "/dev/ram0",	"/dev/ram1"};
	const char *found[2];
	size_t n = 0;
	struct stat st;

	for (size_t i = 0; i < ARRAY_SIZE(cands) && n < 2; i++)
		if (stat(cands[i], &st) == 0 && S_ISBLK(st.st_mode))
			found[n++] = cands[i];
	if (n < 2)
		return false;
	*a = found[0];
	*b = found[1];
	return true;
}

static char *scrape(void)
{
	struct buf out = BUF_INIT(0);
	if (metrics_write(&out) < 0) {
		buf_release(&out);
		return NULL;
	}
	return buf_steal(&out);
}

TEST(csi_nvme_collector_exports_only_good_pages)
{
	const char *da, *db;
	char dir[512], la[600], lb[600];
	size_t len;
	struct csi_nvme_metrics *m = NULL;

	if (!two_block_devices(&da, &db))
		TEST_SKIP(
		    "two block devices under /dev (loop0, loop1...) are needed for the links");
	_cleanup_free_ unsigned char *p = good_page(&len);
	ASSERT_NOT_NULL(p);
	memcpy(src.page, p, len);
	src.len = len;
	src.calls = 0;
	snprintf(dir, sizeof(dir), "%s/by-id", test_tmpdir());
	ASSERT_EQ(mkdir(dir, 0755), 0);
	snprintf(la, sizeof(la), "%s/nvme-Amazon_Elastic_Block_Store_vol0000000000000000a", dir);
	snprintf(lb, sizeof(lb), "%s/nvme-Amazon_Elastic_Block_Store_vol0000000000000000b", dir);
	ASSERT_EQ(symlink(da, la), 0);
	ASSERT_EQ(symlink(db, lb), 0);
	/* a partition's link and a foreign one are not volumes */
	snprintf(lb, sizeof(lb), "%s/nvme-Amazon_Elastic_Block_Store_vol0000000000000000a-part1",
		 dir);
	ASSERT_EQ(symlink(da, lb), 0);
	snprintf(lb, sizeof(lb), "%s/nvme-Some_Other_Disk_123", dir);
	ASSERT_EQ(symlink(db, lb), 0);

	/* no metrics_reset: other modules keep their families for the process */
	ASSERT_OK(csi_nvme_metrics_new(
	    &(struct csi_nvme_metrics_config){.devices = {.by_id_dir = dir},
					      .instance_id = "i-0123456789abcdef0",
					      .read = fake_read},
	    &m));
	const char *const one[] = {"instance_id", NULL};
	struct metric *errors =
	    metric_counter("aws_ebs_csi_nvme_collector_errors_total",
			   "Total number of NVMe collector scrape errors.", one);
	struct metric *scrapes = metric_counter("aws_ebs_csi_nvme_collector_scrapes_total",
						"Total number of NVMe collector scrapes.", one);
	ASSERT_NOT_NULL(errors);
	ASSERT_NOT_NULL(scrapes);
	double errors0 = metric_value(errors, "i-0123456789abcdef0");
	double scrapes0 = metric_value(scrapes, "i-0123456789abcdef0");
	_cleanup_free_ char *out = scrape();
	ASSERT_NOT_NULL(out);
	ASSERT_EQ(src.calls, 2);
#define SERIES(name)                                                                               \
	name "{instance_id=\"i-0123456789abcdef0\",volume_id=\"vol-0000000000000000a\"}"
	ASSERT_CONTAINS(out, "# TYPE aws_ebs_csi_read_ops_total counter\n" SERIES(
				 "aws_ebs_csi_read_ops_total") " 1000\n");
	ASSERT_CONTAINS(out, SERIES("aws_ebs_csi_write_bytes_total") " 8192000\n");
	ASSERT_CONTAINS(out, SERIES("aws_ebs_csi_read_seconds_total") " 1.5\n");
	ASSERT_CONTAINS(out, SERIES("aws_ebs_csi_write_seconds_total") " 3.25\n");
	ASSERT_CONTAINS(out, SERIES("aws_ebs_csi_exceeded_iops_seconds_total") " 0.25\n");
	ASSERT_CONTAINS(out, SERIES("aws_ebs_csi_exceeded_tp_seconds_total") " 0.125\n");
	ASSERT_CONTAINS(out, SERIES("aws_ebs_csi_ec2_exceeded_iops_seconds_total") " 0.5\n");
	ASSERT_CONTAINS(out, SERIES("aws_ebs_csi_ec2_exceeded_tp_seconds_total") " 2\n");
	ASSERT_CONTAINS(out, "# TYPE aws_ebs_csi_volume_queue_length gauge\n" SERIES(
				 "aws_ebs_csi_volume_queue_length") " 7\n");
	ASSERT_CONTAINS(
	    out, "aws_ebs_csi_read_io_latency_seconds_bucket{instance_id=\"i-0123456789abcdef0\","
		 "volume_id=\"vol-0000000000000000a\",le=\"0.002\"} 900\n");
	ASSERT_CONTAINS(out, SERIES("aws_ebs_csi_read_io_latency_seconds_count") " 1000\n");
	ASSERT_CONTAINS(out, SERIES("aws_ebs_csi_read_io_latency_seconds_sum") " 1.5\n");
	ASSERT_CONTAINS(
	    out, "aws_ebs_csi_write_io_latency_seconds_bucket{instance_id=\"i-0123456789abcdef0\","
		 "volume_id=\"vol-0000000000000000a\",le=\"+Inf\"} 2000\n");
	/* the bad page: no series at all, one error */
	ASSERT_NOT_CONTAINS(out, "vol-0000000000000000b");
	ASSERT_TRUE(metric_value(errors, "i-0123456789abcdef0") == errors0 + 1);
	ASSERT_TRUE(metric_value(scrapes, "i-0123456789abcdef0") == scrapes0 + 1);
	ASSERT_CONTAINS(out, "aws_ebs_csi_nvme_collector_duration_seconds_count{instance_id=\"i-"
			     "0123456789abcdef0\"} ");

	/* the volume goes away (its link is removed): its series go with it */
	ASSERT_EQ(unlink(la), 0);
	free(out);
	out = scrape();
	ASSERT_NOT_NULL(out);
	ASSERT_NOT_CONTAINS(out, "vol-0000000000000000a");
	ASSERT_NOT_CONTAINS(out, "aws_ebs_csi_read_ops_total");
	ASSERT_TRUE(metric_value(scrapes, "i-0123456789abcdef0") == scrapes0 + 2);
	csi_nvme_metrics_free(m);
	/* freed: no collector runs any more */
	free(out);
	src.calls = 0;
	out = scrape();
	ASSERT_EQ(src.calls, 0);
	ASSERT_NOT_CONTAINS(out, "vol-0000000000000000");
#undef SERIES
}

TEST(csi_nvme_read_file_source)
{
	char path[512], buf[CSI_NVME_PAGE_SIZE];
	const char *dir = test_tmpdir();

	snprintf(path, sizeof(path), "%s/vol-0abc", dir);
	FILE *f = fopen(path, "w");
	ASSERT_NOT_NULL(f);
	fputs("short", f);
	fclose(f);
	ASSERT_EQ(csi_nvme_read_file((void *)dir, "/dev/nvme1n1", "vol-0abc", buf, sizeof(buf)), 5);
	/* no file: the device offers no page */
	ASSERT_ERR(csi_nvme_read_file((void *)dir, "/dev/nvme1n1", "vol-0def", buf, sizeof(buf)),
		   EOPNOTSUPP);
}

TEST(csi_nvme_read_ioctl_not_nvme)
{
	char buf[CSI_NVME_PAGE_SIZE];
	const char *da, *db;

	/* a regular file has no NVMe admin interface */
	ASSERT_ERR(csi_nvme_read_ioctl(NULL, "/dev/null", "vol-0abc", buf, sizeof(buf)),
		   EOPNOTSUPP);
	ASSERT_ERR(csi_nvme_read_ioctl(NULL, "/nonexistent/dev", "vol-0abc", buf, sizeof(buf)),
		   ENOENT);
	if (two_block_devices(&da, &db) && access(da, R_OK) == 0)
		ASSERT_ERR(csi_nvme_read_ioctl(NULL, da, "vol-0abc", buf, sizeof(buf)), EOPNOTSUPP);
}
