/* `cpm converge --dry-run`: the converge runs on a copy of ROOT/etc/kubernetes (a shadow root in
 * a temporary folder, its backups left out), then the copy is compared with the real folder and
 * what would change is printed; the real folder is never written.
 *
 *   char shadow[64];
 *   r = cpm_shadow_make(root, shadow, sizeof(shadow));   // copy of ROOT/etc/kubernetes
 *   ... converge with root = shadow, no waits ...
 *   n = cpm_shadow_diff(root, shadow, stdout);            // files that would change
 *   cpm_shadow_remove(shadow);
 *
 * The diff is `diff -u` for the static-pod manifests and the kubeadm configuration and patches;
 * the other files (keys, certificates, kubeconfigs with their keys, extra files that may hold
 * the encryption key) are named with what would happen to them, their content never printed. */
#pragma once
#include <stddef.h>
#include <stdio.h>

int cpm_shadow_make(const char *root, char *shadow, size_t n);
/* Prints the changes, returns how many files would change (created, replaced, removed). */
int cpm_shadow_diff(const char *root, const char *shadow, FILE *out);
void cpm_shadow_remove(const char *shadow);
