/* Deckhouse's backups of what a converge replaces or removes: each file is copied, before it
 * changes, to ROOT/etc/kubernetes/deckhouse/backup/<YYYY-MM-DD>_<configChecksum>/<abs path>
 * (folders 0700, the file's mode kept), and only the newest CPM_BACKUP_KEEP backup folders are
 * kept (by mtime, then name).
 *
 *   struct cpm_backup b = { .root = root, .config_checksum = sum };
 *   r = cpm_backup_file(&b, "/etc/kubernetes/manifests/etcd.yaml");   // 0 copied, -ENOENT
 *   r = cpm_backup_prune(root);                                        // folders removed
 *
 * Restoring is copying a file back: `cp -a BACKUP/etc/kubernetes/... ROOT/etc/kubernetes/...`. */
#pragma once
#include <stddef.h>
#include <time.h>

#define CPM_BACKUP_KEEP 5
#define CPM_BACKUP_DIR "/etc/kubernetes/deckhouse/backup"

struct cpm_backup {
	const char *root;	     /* NULL, "" or "/": the real root */
	const char *config_checksum; /* names the folder */
	time_t now;		     /* 0: the clock (the folder's date, UTC) */
};

/* Copies ROOT+abs into the backup folder; -ENOENT when there is nothing to back up. */
int cpm_backup_file(const struct cpm_backup *b, const char *abs);
/* The folder (under ROOT) that cpm_backup_file writes to. */
int cpm_backup_folder(const struct cpm_backup *b, char *buf, size_t n);
/* Removes all but the newest CPM_BACKUP_KEEP folders; returns how many went, or -errno. */
int cpm_backup_prune(const char *root);
/* rm -r of path (no link followed); -errno. */
int cpm_remove_tree(const char *path);
