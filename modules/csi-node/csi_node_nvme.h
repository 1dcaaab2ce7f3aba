/* The node's metrics: the EBS NVMe detailed performance statistics of each EBS volume of the
 * node, under upstream's names (aws-ebs-csi-driver pkg/metrics/nvme.go), computed at each
 * scrape of --http-endpoint:
 *
 *   aws_ebs_csi_{read,write}_ops_total, _{read,write}_bytes_total, _{read,write}_seconds_total,
 *   aws_ebs_csi_{,ec2_}exceeded_{iops,tp}_seconds_total          counters
 *   aws_ebs_csi_volume_queue_length                             gauge
 *   aws_ebs_csi_{read,write}_io_latency_seconds                 histograms (the page's bins)
 *       labels instance_id (the node's), volume_id
 *   aws_ebs_csi_nvme_collector_{scrapes,errors}_total, _duration_seconds   label instance_id
 *
 * A volume's series exist only while its device answers with a well-formed page: a device
 * without the page (not NVMe, not EBS), a bad magic or a short page leave no series (a debug
 * log; bad pages and read errors count in nvme_collector_errors_total), and the series of a
 * volume that went away are removed.
 *
 * The page is EBS's vendor-specific log page 0xD0, 4096 bytes read by an NVMe admin Get Log
 * Page command (NVME_IOCTL_ADMIN_CMD on the volume's block device, as upstream does). Layout,
 * little endian, 3600 bytes used:
 *      0  u64 magic 0x3C23B510
 *      8  u64 read ops, 16 write ops, 24 read bytes, 32 write bytes
 *     40  u64 total read time, 48 total write time                          (microseconds)
 *     56  u64 time over the volume's IOPS, 64 over its throughput            (microseconds)
 *     72  u64 time over the instance's IOPS, 80 over its throughput          (microseconds)
 *     88  u64 queue length
 *     96  416 bytes reserved
 *    512  read latency histogram: u64 bin count (at most 64), then 64 bins of u64 lower bound,
 *         upper bound (microseconds) and count
 *   2056  write latency histogram, the same
 * The counters are exported in seconds where upstream does (time / 1e6); a histogram's buckets
 * are its first <bin count> bins, le = upper bound / 1e6, cumulative. Upstream exports the
 * histograms with a sum of 0; here the sum is the page's total read (write) time, the sum of
 * the latencies the histogram counts. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "modules/csi-node/csi_node_device.h"

#define CSI_NVME_LOG_PAGE_ID 0xD0
#define CSI_NVME_MAGIC 0x3C23B510u
#define CSI_NVME_PAGE_SIZE 4096 /* what is read */
#define CSI_NVME_PAGE_USED 3600 /* what the layout covers: a shorter page is refused */
#define CSI_NVME_HIST_BINS 64
/* The most volumes exported at once. */
#define CSI_NVME_MAX_VOLUMES 256

struct csi_nvme_bin {
	uint64_t lower, upper, count; /* microseconds */
};

struct csi_nvme_hist {
	uint64_t n; /* bins in use */
	struct csi_nvme_bin bin[CSI_NVME_HIST_BINS];
};

struct csi_nvme_stats {
	uint64_t read_ops, write_ops, read_bytes, write_bytes;
	uint64_t read_time_us, write_time_us;
	uint64_t ebs_iops_exceeded_us, ebs_tp_exceeded_us;
	uint64_t ec2_iops_exceeded_us, ec2_tp_exceeded_us;
	uint64_t queue_length;
	struct csi_nvme_hist read_latency, write_latency;
};

/* Parses a page of len bytes: 0, or -EMSGSIZE (shorter than CSI_NVME_PAGE_USED), -EBADMSG (not
 * the EBS magic; a histogram with more than 64 bins, or whose bins' upper bounds do not
 * ascend). */
int csi_nvme_parse(const void *page, size_t len, struct csi_nvme_stats *ret);

/* A histogram as Prometheus buckets: le[i] in seconds, cum[i] cumulative, *ret_count the total.
 * le and cum hold CSI_NVME_HIST_BINS. The number of buckets, or -EOVERFLOW. */
int csi_nvme_hist_buckets(const struct csi_nvme_hist *h, double *le, uint64_t *cum,
			  uint64_t *ret_count);

/* Where pages come from: reads the page of volume_id's device (/dev/nvme1n1) into buf (cap
 * bytes). The bytes read, or -errno: -EOPNOTSUPP when the device offers no such page. */
typedef ssize_t (*csi_nvme_read_fn)(void *ud, const char *device, const char *volume_id, void *buf,
				    size_t cap);
/* The real one: Get Log Page 0xD0 through NVME_IOCTL_ADMIN_CMD on the device. */
ssize_t csi_nvme_read_ioctl(void *ud, const char *device, const char *volume_id, void *buf,
			    size_t cap);
/* The test mode's (--nvme-log-page-dir): the file <ud>/<volume_id>, ud a directory path;
 * -EOPNOTSUPP when there is no such file. */
ssize_t csi_nvme_read_file(void *ud, const char *device, const char *volume_id, void *buf,
			   size_t cap);

struct csi_nvme_metrics_config {
	struct csi_node_devices devices; /* where the volumes are found (copied) */
	const char *instance_id;	 /* the instance_id label (copied) */
	csi_nvme_read_fn read;		 /* NULL: csi_nvme_read_ioctl */
	void *read_ud;			 /* must outlive the collector */
};

struct csi_nvme_metrics;
/* Registers the families and the collector that fills them at each scrape. 0, -ENOMEM, or
 * -EEXIST when a name is taken with another type or labels. */
int csi_nvme_metrics_new(const struct csi_nvme_metrics_config *cfg, struct csi_nvme_metrics **ret);
/* Removes the collector and the volumes' series. */
void csi_nvme_metrics_free(struct csi_nvme_metrics *m);
