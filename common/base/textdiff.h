/* A unified diff (as `diff -u`) of two texts, for showing what a change would write.
 *
 *   _cleanup_buf_ struct buf d = BUF_INIT(0);
 *   r = text_diff(old ?: "", new_text, "a/etc/kubernetes/manifests/etcd.yaml",
 *                 "b/etc/kubernetes/manifests/etcd.yaml", 3, &d);  // 0 same, 1 differ
 *   if (r == 1) fwrite(d.data, 1, d.len, stdout);
 *
 * Lines end at '\n'; a last line without one is a line too (marked "\ No newline at end of
 * file" as diff does). The longest common subsequence of lines decides what is kept (a table of
 * len(a) x len(b) 16-bit cells): texts over TEXT_DIFF_MAX_LINES lines each are not compared line
 * by line and give -E2BIG. Returns 0 (identical: nothing appended), 1 (the diff appended), or
 * -ENOMEM / -E2BIG. */
#pragma once
#include "common/base/buf.h"

#define TEXT_DIFF_MAX_LINES 2000

int text_diff(const char *a, const char *b, const char *name_a, const char *name_b, int context,
	      struct buf *out);
