/* Files under the root cpm writes to (kubeadm's --rootfs): paths, folders, and writes that
 * leave a file alone (content and mtime) when it already holds what would be written.
 *
 *   char p[4096];
 *   r = cpm_path(root, "/etc/kubernetes/manifests/etcd.yaml", p, sizeof(p));
 *   r = cpm_write_if_changed(p, text, len, 0600);   // 0: unchanged, 1: written, -errno
 *
 * root NULL, "" or "/" is the real root. Folders are made 0755 as needed. Writes are atomic
 * (file_write_atomic: a temporary file renamed over the old one). */
#pragma once
#include <stddef.h>
#include <sys/types.h>

/* root + abs (abs starts with '/'); -ENAMETOOLONG. */
int cpm_path(const char *root, const char *abs, char *buf, size_t n);
/* mkdir -p of path (0755). */
int cpm_mkdirs(const char *path);
/* mkdir -p of the folder holding path. */
int cpm_mkdirs_for(const char *path);
/* 0 when path already holds exactly data with mode, 1 after writing it (folders made), -errno. */
int cpm_write_if_changed(const char *path, const void *data, size_t len, mode_t mode);
