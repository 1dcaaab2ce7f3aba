/* The EBS NVMe statistics of the node's volumes, as upstream's node metrics (see
 * csi_node_nvme.h): the page's parser, its two sources, and the collector. */
#include "modules/csi-node/csi_node_nvme.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/nvme_ioctl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/base/buf.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "common/metrics/metrics.h"

#define OFF_READ_HIST 512
#define OFF_WRITE_HIST 2056
#define HIST_BYTES (8 + CSI_NVME_HIST_BINS * 24)
#define NVME_ADMIN_GET_LOG_PAGE 0x02
#define ID_MAX 32 /* "vol-" and 17 hex digits fit */

/* ---- the page ---- */

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static int parse_hist(const unsigned char *p, struct csi_nvme_hist *h)
{
	h->n = le64(p);
	if (h->n > CSI_NVME_HIST_BINS)
		return -EBADMSG;
	for (size_t i = 0; i < CSI_NVME_HIST_BINS; i++) {
		const unsigned char *b = p + 8 + i * 24;
		h->bin[i] = (struct csi_nvme_bin){le64(b), le64(b + 8), le64(b + 16)};
		if (i && i < h->n && h->bin[i].upper <= h->bin[i - 1].upper)
			return -EBADMSG;
	}
	return 0;
}

int csi_nvme_parse(const void *page, size_t len, struct csi_nvme_stats *ret)
{
	const unsigned char *p = page;
	uint64_t *const fields[] = {
	    &ret->read_ops,
	    &ret->write_ops,
	    &ret->read_bytes,
	    &ret->write_bytes,
	    &ret->read_time_us,
	    &ret->write_time_us,
	    &ret->ebs_iops_exceeded_us,
	    &ret->ebs_tp_exceeded_us,
	    &ret->ec2_iops_exceeded_us,
	    &ret->ec2_tp_exceeded_us,
	    &ret->queue_length,
	};
	int r;

	if (!page || len < CSI_NVME_PAGE_USED)
		return -EMSGSIZE;
	if (le64(p) != CSI_NVME_MAGIC)
		return -EBADMSG;
	for (size_t i = 0; i < ARRAY_SIZE(fields); i++)
		*fields[i] = le64(p + 8 + 8 * i);
	if ((r = parse_hist(p + OFF_READ_HIST, &ret->read_latency)) < 0 ||
	    (r = parse_hist(p + OFF_WRITE_HIST, &ret->write_latency)) < 0)
		return r;
	return 0;
}

int csi_nvme_hist_buckets(const struct csi_nvme_hist *h, double *le, uint64_t *cum,
			  uint64_t *ret_count)
{
	uint64_t total = 0;
	size_t n = h->n < CSI_NVME_HIST_BINS ? (size_t)h->n : CSI_NVME_HIST_BINS;

	for (size_t i = 0; i < n; i++) {
		if (total > UINT64_MAX - h->bin[i].count)
			return -EOVERFLOW;
		total += h->bin[i].count;
		le[i] = (double)h->bin[i].upper / 1e6;
		cum[i] = total;
	}
	*ret_count = total;
	return (int)n;
}

/* ---- where pages come from ---- */

ssize_t csi_nvme_read_ioctl(void *ud, const char *device, const char *volume_id, void *buf,
			    size_t cap)
{
	struct nvme_admin_cmd cmd = {
	    .opcode = NVME_ADMIN_GET_LOG_PAGE,
	    .nsid = 1, /* as upstream asks EBS */
	    .addr = (uintptr_t)buf,
	    .data_len = CSI_NVME_PAGE_SIZE,
	    /* the log id, and the number of dwords minus one */
	    .cdw10 = CSI_NVME_LOG_PAGE_ID | (uint32_t)(CSI_NVME_PAGE_SIZE / 4 - 1) << 16,
	};
	int fd, r;

	if (cap < CSI_NVME_PAGE_SIZE)
		return -ENOBUFS;
	if ((fd = open(device, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
		return -errno;
	r = ioctl(fd, NVME_IOCTL_ADMIN_CMD, &cmd);
	int e = errno;
	close(fd);
	if (r < 0)
		return e == ENOTTY || e == EINVAL ? -EOPNOTSUPP : -e;
	if (r > 0) /* an NVMe status: the controller refused the command (no such page) */
		return -EOPNOTSUPP;
	return CSI_NVME_PAGE_SIZE;
}

ssize_t csi_nvme_read_file(void *ud, const char *device, const char *volume_id, void *buf,
			   size_t cap)
{
	char path[PATH_MAX];
	size_t got = 0;
	int fd;

	if (str_printf(path, sizeof(path), "%s/%s", (const char *)ud, volume_id) < 0)
		return -ENAMETOOLONG;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return errno == ENOENT ? -EOPNOTSUPP : -errno;
	while (got < cap) {
		ssize_t k = read(fd, (char *)buf + got, cap - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (k == 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	return (ssize_t)got;
}

/* ---- the node's EBS volumes ---- */

struct vol {
	char id[ID_MAX];
	char device[64]; /* /dev/<alnum>, csi_node_find_device's check */
};

/* The volume id of a by-id link name: nvme-Amazon_Elastic_Block_Store_vol0abc (or its "_1"
 * namespace form) gives vol-0abc; a partition's link, or anything else, -ENOENT. */
static int link_volume(const char *name, char ret[ID_MAX])
{
	const char *s = name + strlen(CSI_EBS_BY_ID_PREFIX), *end;

	if (!str_has_prefix(name, CSI_EBS_BY_ID_PREFIX) || !str_has_prefix(s, "vol"))
		return -ENOENT;
	for (end = s + 3; isalnum((unsigned char)*end); end++)
		;
	if (end == s + 3 || (*end && strcmp(end, "_1") != 0) || end - s + 2 > ID_MAX)
		return -ENOENT;
	return str_printf(ret, ID_MAX, "vol-%.*s", (int)(end - s - 3), s + 3);
}

/* The EBS volumes of the by-id directory whose device csi_node_find_device accepts (each
 * once), at most CSI_NVME_MAX_VOLUMES. 0 (none when the directory is missing) or -errno. */
static int list_volumes(const struct csi_node_devices *d, struct vol *ret, size_t *ret_n)
{
	const char *dir = d->by_id_dir && *d->by_id_dir ? d->by_id_dir : "/dev/disk/by-id";
	DIR *dh = opendir(dir);
	struct dirent *de;
	size_t n = 0, seen = 0;

	*ret_n = 0;
	if (!dh)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(dh)) && seen++ < CSI_BY_ID_MAX_ENTRIES && n < CSI_NVME_MAX_VOLUMES) {
		char id[ID_MAX], msg[256];
		bool dup = false;
		if (link_volume(de->d_name, id) < 0)
			continue;
		for (size_t i = 0; i < n && !dup; i++)
			dup = strcmp(ret[i].id, id) == 0;
		if (dup)
			continue;
		int r = csi_node_find_device(d, id, NULL, NULL, ret[n].device,
					     sizeof(ret[n].device), msg, sizeof(msg));
		if (r < 0) {
			log_v(4, "no device for the volume's metrics", KV_S("volume", id),
			      KV_S("why", msg), KV_E(r));
			continue;
		}
		str_copy(ret[n].id, ID_MAX, id);
		n++;
	}
	closedir(dh);
	*ret_n = n;
	return 0;
}

/* ---- the collector ---- */

/* The per-volume families: the scalars, then the two histograms. */
static const struct scalar {
	const char *name, *help;
	enum metric_type type;
	size_t off;	/* in struct csi_nvme_stats */
	double divisor; /* microseconds to seconds: 1e6 */
} scalars[] = {
    {"aws_ebs_csi_read_ops_total", "The total number of completed read operations.", METRIC_COUNTER,
     offsetof(struct csi_nvme_stats, read_ops), 1},
    {"aws_ebs_csi_write_ops_total", "The total number of completed write operations.",
     METRIC_COUNTER, offsetof(struct csi_nvme_stats, write_ops), 1},
    {"aws_ebs_csi_read_bytes_total", "The total number of read bytes transferred.", METRIC_COUNTER,
     offsetof(struct csi_nvme_stats, read_bytes), 1},
    {"aws_ebs_csi_write_bytes_total", "The total number of write bytes transferred.",
     METRIC_COUNTER, offsetof(struct csi_nvme_stats, write_bytes), 1},
    {"aws_ebs_csi_read_seconds_total",
     "The total time spent, in seconds, by all completed read operations.", METRIC_COUNTER,
     offsetof(struct csi_nvme_stats, read_time_us), 1e6},
    {"aws_ebs_csi_write_seconds_total",
     "The total time spent, in seconds, by all completed write operations.", METRIC_COUNTER,
     offsetof(struct csi_nvme_stats, write_time_us), 1e6},
    {"aws_ebs_csi_exceeded_iops_seconds_total",
     "The total time, in seconds, that IOPS demand exceeded the volume's provisioned IOPS "
     "performance.",
     METRIC_COUNTER, offsetof(struct csi_nvme_stats, ebs_iops_exceeded_us), 1e6},
    {"aws_ebs_csi_exceeded_tp_seconds_total",
     "The total time, in seconds, that throughput demand exceeded the volume's provisioned "
     "throughput performance.",
     METRIC_COUNTER, offsetof(struct csi_nvme_stats, ebs_tp_exceeded_us), 1e6},
    {"aws_ebs_csi_ec2_exceeded_iops_seconds_total",
     "The total time, in seconds, that the EBS volume exceeded the attached Amazon EC2 "
     "instance's maximum IOPS performance.",
     METRIC_COUNTER, offsetof(struct csi_nvme_stats, ec2_iops_exceeded_us), 1e6},
    {"aws_ebs_csi_ec2_exceeded_tp_seconds_total",
     "The total time, in seconds, that the EBS volume exceeded the attached Amazon EC2 "
     "instance's maximum throughput performance.",
     METRIC_COUNTER, offsetof(struct csi_nvme_stats, ec2_tp_exceeded_us), 1e6},
    {"aws_ebs_csi_volume_queue_length",
     "The number of read and write operations waiting to be completed.", METRIC_GAUGE,
     offsetof(struct csi_nvme_stats, queue_length), 1},
};
#define N_SCALARS ARRAY_SIZE(scalars)
#define N_FAMILIES (N_SCALARS + 2)

struct csi_nvme_metrics {
	struct csi_node_devices devices;
	char *by_id_dir, *sysfs, *instance_id;
	csi_nvme_read_fn read;
	void *read_ud;
	struct metric *fam[N_FAMILIES]; /* scalars, read latency, write latency */
	struct metric *m_scrapes, *m_errors, *m_duration;
	pthread_mutex_t lock;  /* one scrape at a time; guards what follows */
	unsigned char *page;   /* CSI_NVME_PAGE_SIZE */
	struct vol *vols;      /* CSI_NVME_MAX_VOLUMES, this scrape's */
	char (*shown)[ID_MAX]; /* the volumes with series, CSI_NVME_MAX_VOLUMES */
	size_t n_shown;
};

static void remove_volume(struct csi_nvme_metrics *m, const char *id)
{
	for (size_t f = 0; f < N_FAMILIES; f++)
		metric_remove(m->fam[f], m->instance_id, id);
}

static int set_hist(struct csi_nvme_metrics *m, struct metric *fam, const struct csi_nvme_hist *h,
		    uint64_t time_us, const char *id)
{
	double le[CSI_NVME_HIST_BINS];
	uint64_t cum[CSI_NVME_HIST_BINS], count;
	int n = csi_nvme_hist_buckets(h, le, cum, &count);

	if (n < 0)
		return n;
	return metric_histogram_set(fam, le, cum, (size_t)n, count, (double)time_us / 1e6,
				    m->instance_id, id);
}

/* One volume's page into its series: 0, or -errno (nothing changed but what was set). */
static int export_volume(struct csi_nvme_metrics *m, const struct vol *v)
{
	struct csi_nvme_stats st;
	ssize_t k = m->read(m->read_ud, v->device, v->id, m->page, CSI_NVME_PAGE_SIZE);
	int r;

	if (k < 0)
		return (int)k;
	if ((r = csi_nvme_parse(m->page, (size_t)k, &st)) < 0)
		return r;
	/* the histograms first: a bad one leaves the volume without series */
	if ((r = set_hist(m, m->fam[N_SCALARS], &st.read_latency, st.read_time_us, v->id)) < 0 ||
	    (r = set_hist(m, m->fam[N_SCALARS + 1], &st.write_latency, st.write_time_us, v->id)) <
		0)
		return r;
	for (size_t i = 0; i < N_SCALARS; i++) {
		uint64_t raw = *(const uint64_t *)((const char *)&st + scalars[i].off);
		metric_set(m->fam[i], (double)raw / scalars[i].divisor, m->instance_id, v->id);
	}
	return 0;
}

static void collect(void *ud)
{
	struct csi_nvme_metrics *m = ud;
	int64_t t0 = now_mono_ns();
	size_t n = 0, n_now = 0;
	char(*now)[ID_MAX] = NULL;
	int r;

	metric_inc(m->m_scrapes, m->instance_id);
	pthread_mutex_lock(&m->lock);
	if ((r = list_volumes(&m->devices, m->vols, &n)) < 0) {
		log_error("cannot list the EBS volumes for the metrics", KV_E(r));
		metric_inc(m->m_errors, m->instance_id);
		goto out; /* the series stay as they were */
	}
	if (!(now = calloc(CSI_NVME_MAX_VOLUMES, sizeof(*now))))
		goto out;
	for (size_t i = 0; i < n; i++) {
		if ((r = export_volume(m, &m->vols[i])) == 0) {
			str_copy(now[n_now++], ID_MAX, m->vols[i].id);
			continue;
		}
		log_v(4, "no EBS statistics for the volume", KV_S("volume", m->vols[i].id),
		      KV_S("device", m->vols[i].device), KV_E(r));
		if (r != -EOPNOTSUPP)
			metric_inc(m->m_errors, m->instance_id);
		remove_volume(m, m->vols[i].id);
	}
	/* the volumes gone since the last scrape */
	for (size_t i = 0; i < m->n_shown; i++) {
		bool still = false;
		for (size_t j = 0; j < n_now && !still; j++)
			still = strcmp(m->shown[i], now[j]) == 0;
		if (!still)
			remove_volume(m, m->shown[i]);
	}
	memcpy(m->shown, now, n_now * sizeof(*now));
	m->n_shown = n_now;
out:
	pthread_mutex_unlock(&m->lock);
	free(now);
	metric_observe(m->m_duration, (double)(now_mono_ns() - t0) / 1e9, m->instance_id);
}

static int register_families(struct csi_nvme_metrics *m)
{
	static const double buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
					 0.25,	0.5,	1,     2.5,  5,	    10}; /* upstream's */
	const char *const labels[] = {"instance_id", "volume_id", NULL};
	const char *const collector[] = {"instance_id", NULL};

	for (size_t i = 0; i < N_SCALARS; i++)
		m->fam[i] = scalars[i].type == METRIC_GAUGE
				? metric_gauge(scalars[i].name, scalars[i].help, labels)
				: metric_counter(scalars[i].name, scalars[i].help, labels);
	/* buckets NULL: each series brings the page's own */
	m->fam[N_SCALARS] = metric_histogram(
	    "aws_ebs_csi_read_io_latency_seconds",
	    "The number of read operations completed within each latency bin, in seconds.", labels,
	    NULL, 0);
	m->fam[N_SCALARS + 1] = metric_histogram(
	    "aws_ebs_csi_write_io_latency_seconds",
	    "The number of write operations completed within each latency bin, in seconds.", labels,
	    NULL, 0);
	m->m_scrapes = metric_counter("aws_ebs_csi_nvme_collector_scrapes_total",
				      "Total number of NVMe collector scrapes.", collector);
	m->m_errors = metric_counter("aws_ebs_csi_nvme_collector_errors_total",
				     "Total number of NVMe collector scrape errors.", collector);
	m->m_duration = metric_histogram("aws_ebs_csi_nvme_collector_duration_seconds",
					 "Histogram of NVMe collector scrape duration in seconds.",
					 collector, buckets, ARRAY_SIZE(buckets));
	for (size_t i = 0; i < N_FAMILIES; i++)
		if (!m->fam[i])
			return -EEXIST;
	if (!m->m_scrapes || !m->m_errors || !m->m_duration)
		return -EEXIST;
	metric_add(m->m_errors, 0, m->instance_id); /* shown from the start, as upstream's */
	return 0;
}

int csi_nvme_metrics_new(const struct csi_nvme_metrics_config *cfg, struct csi_nvme_metrics **ret)
{
	struct csi_nvme_metrics *m = calloc(1, sizeof(*m));
	int r = -ENOMEM;

	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->read = cfg->read ? cfg->read : csi_nvme_read_ioctl;
	m->read_ud = cfg->read_ud;
	if ((cfg->devices.by_id_dir && !(m->by_id_dir = strdup(cfg->devices.by_id_dir))) ||
	    (cfg->devices.sysfs && !(m->sysfs = strdup(cfg->devices.sysfs))) ||
	    !(m->instance_id = strdup(cfg->instance_id ? cfg->instance_id : "")) ||
	    !(m->page = malloc(CSI_NVME_PAGE_SIZE)) ||
	    !(m->vols = calloc(CSI_NVME_MAX_VOLUMES, sizeof(*m->vols))) ||
	    !(m->shown = calloc(CSI_NVME_MAX_VOLUMES, sizeof(*m->shown))))
		goto fail;
	m->devices = (struct csi_node_devices){.by_id_dir = m->by_id_dir, .sysfs = m->sysfs};
	if ((r = register_families(m)) < 0)
		goto fail;
	metrics_add_collector(collect, m);
	*ret = m;
	return 0;
fail:
	csi_nvme_metrics_free(m);
	return r;
}

void csi_nvme_metrics_free(struct csi_nvme_metrics *m)
{
	if (!m)
		return;
	metrics_remove_collector(collect, m);
	for (size_t i = 0; i < m->n_shown; i++)
		remove_volume(m, m->shown[i]);
	pthread_mutex_destroy(&m->lock);
	free(m->by_id_dir);
	free(m->sysfs);
	free(m->instance_id);
	free(m->page);
	free(m->vols);
	free(m->shown);
	free(m);
}
