#!/usr/bin/env python3
"""Writes ebs_nvme_page.bin: an EBS NVMe log page 0xD0 (4096 bytes) built from the layout that
aws-ebs-csi-driver pkg/metrics/nvme.go reads (EBSMetrics, little endian), not recorded from a
device. The values are the ones tests/unit/test_csi_node_nvme.c and
tests/integration/csi_metrics.sh expect:

  read ops 1000, write ops 2000, read bytes 4096000, write bytes 8192000,
  read time 1.5 s, write time 3.25 s, over the volume's IOPS 0.25 s, throughput 0.125 s,
  over the instance's IOPS 0.5 s, throughput 2 s, queue length 7;
  read latency: 4 bins (us) 0-1000: 600, 1000-2000: 300, 2000-5000: 90, 5000-10000: 10;
  write latency: 3 bins (us) 0-500: 1500, 500-2500: 400, 2500-1000000: 100.

Run it from this directory to write the file again."""
import struct

MAGIC = 0x3C23B510


def hist(bins):
    out = struct.pack("<Q", len(bins))
    for i in range(64):
        lo, up, n = bins[i] if i < len(bins) else (0, 0, 0)
        out += struct.pack("<QQQ", lo, up, n)
    return out


def page():
    head = struct.pack("<12Q", MAGIC, 1000, 2000, 4096000, 8192000, 1500000, 3250000,
                       250000, 125000, 500000, 2000000, 7)
    body = head + bytes(416)
    body += hist([(0, 1000, 600), (1000, 2000, 300), (2000, 5000, 90), (5000, 10000, 10)])
    body += hist([(0, 500, 1500), (500, 2500, 400), (2500, 1000000, 100)])
    assert len(body) == 3600
    return body + bytes(4096 - len(body))


if __name__ == "__main__":
    with open("ebs_nvme_page.bin", "wb") as f:
        f.write(page())
