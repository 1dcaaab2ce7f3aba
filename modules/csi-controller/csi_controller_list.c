/* ListVolumes and ListSnapshots, and the paging they share.
 *
 * EC2 pages with MaxResults of at least 5 (DescribeSnapshots) and its own NextToken; CSI
 * callers may ask for any max_entries. Our token carries the EC2 token of the page being read
 * and how many of its items were returned already, so any page size works (upstream refuses
 * max_entries 1 to 4). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/aws/client.h"
#include "common/aws/error.h"
#include "common/aws/ids.h"
#include "common/base/base64.h"
#include "common/base/buf.h"
#include "modules/csi-controller/csi_controller_internal.h"

#define MAX_TOKEN 4096
#define MAX_PAGES 1000

/* Our token: "1:<skip>:<EC2 token>" in URL-safe base64 (common/base/base64.h). */
int csi_token_encode(const char *aws_token, size_t skip, char **ret)
{
	_cleanup_buf_ struct buf in = BUF_INIT(MAX_TOKEN);
	int r;

	if ((r = buf_printf(&in, "1:%zu:%s", skip, aws_token ? aws_token : "")) < 0)
		return r;
	return base64_encode(in.data, in.len, BASE64_URL, ret);
}

int csi_token_decode(const char *token, char **ret_aws_token, size_t *ret_skip)
{
	_cleanup_free_ char *out = NULL;
	size_t len;
	long long skip;

	if (!token || strlen(token) > 2 * MAX_TOKEN)
		return -EINVAL;
	if (base64_decode(token, strlen(token), BASE64_URL, (void **)&out, &len) < 0 ||
	    !str_has_prefix(out, "1:") || memchr(out, 0, len))
		return -EINVAL;
	char *colon = strchr(out + 2, ':');
	if (!colon)
		return -EINVAL;
	*colon = 0;
	if (str_to_ll(out + 2, 0, 1000000, &skip) < 0)
		return -EINVAL;
	char *aws = *(colon + 1) ? strdup(colon + 1) : NULL;
	if (*(colon + 1) && !aws)
		return -ENOMEM;
	*ret_aws_token = aws;
	*ret_skip = (size_t)skip;
	return 0;
}

/* A CSI list call over EC2's pages. */
struct pager {
	const char *what; /* "listing volumes": what failed, in the error */
	/* One EC2 page (token NULL: the first): its items, freed with free_items, their number,
	 * and the next EC2 token (malloc'd, NULL at the end). */
	int (*fetch)(struct csi_ctrl *c, const void *arg, const char *token, int max, void **ret,
		     size_t *ret_n, char **ret_next, struct aws_error *err);
	/* Adds entry i of a page to out; -ENOMEM. */
	int (*add)(void *out, const void *items, size_t i);
	void (*free_items)(void *items, size_t n);
};

/* The token of what is left after item `at` of the page of aws_token, or of the next page;
 * NULL in *ret when nothing is left. */
static int next_token_of(const char *aws_token, size_t at, bool page_left, const char *next,
			 char **ret)
{
	*ret = NULL;
	if (page_left) /* more in this page: resume inside it */
		return csi_token_encode(aws_token, at, ret);
	if (next)
		return csi_token_encode(next, 0, ret);
	return 0;
}

/* Adds at most req->max_entries (0: all) entries to out, from req->starting_token ("" for
 * the start) on, with *ret_next_token when more are left. */
static enum csi_code list_pages(struct csi_ctrl *c, const struct pager *pg, const void *arg,
				const struct csi_ctrl_page_req *req, void *out,
				char **ret_next_token, struct csi_error *err)
{
	char *aws_token = NULL, *next = NULL;
	size_t skip = 0, got = 0;
	size_t want = req->max_entries ? (size_t)req->max_entries : SIZE_MAX;
	int r;

	csi_error_ok(err);
	if (*req->starting_token && csi_token_decode(req->starting_token, &aws_token, &skip) < 0)
		return csi_error_set(err, CSI_ABORTED, "invalid starting_token");
	for (unsigned pages = 0; err->code == CSI_OK; pages++) {
		void *items = NULL;
		size_t n = 0, i;
		struct aws_error aerr = {0};
		if (pages > MAX_PAGES) {
			csi_error_set(err, CSI_INTERNAL, "too many pages");
			break;
		}
		free(next);
		next = NULL;
		if ((r = pg->fetch(c, arg, aws_token, req->max_entries, &items, &n, &next, &aerr)) <
		    0) {
			ctrl_aws_fail(err, r, &aerr, pg->what, CSI_INTERNAL, CSI_INTERNAL);
			break;
		}
		if (skip > n) /* the page shrank since the token was made */
			csi_error_set(err, CSI_ABORTED, "starting_token is out of date");
		for (i = skip; err->code == CSI_OK && i < n && got < want; i++, got++)
			if (pg->add(out, items, i) < 0)
				csi_error_set(err, CSI_RESOURCE_EXHAUSTED, "out of memory");
		pg->free_items(items, n);
		if (err->code != CSI_OK)
			break;
		if (i >= n && next && got < want) { /* on to the next page */
			free(aws_token);
			aws_token = TAKE_PTR(next);
			skip = 0;
			continue;
		}
		if (next_token_of(aws_token, i, i < n, next, ret_next_token) < 0)
			csi_error_set(err, CSI_RESOURCE_EXHAUSTED, "out of memory");
		break;
	}
	free(aws_token);
	free(next);
	return err->code;
}

/* Room for one more element in a growing array. */
static void *grow(void *arr, size_t n, size_t size)
{
	if (n & (n - 1)) /* not a power of two: there is room */
		return arr;
	return reallocarray(arr, n ? 2 * n : 1, size);
}

/* ---- ListVolumes ---- */

static int fetch_volumes(struct csi_ctrl *c, const void *arg, const char *token, int max,
			 void **ret, size_t *ret_n, char **ret_next, struct aws_error *err)
{
	struct ec2_volume *v = NULL;
	int r = ec2_list_volumes(c, token, max, &v, ret_n, ret_next, err);

	*ret = v;
	return r;
}

static int add_volume(void *out, const void *items, size_t i)
{
	struct csi_ctrl_volume_list *l = out;
	struct csi_ctrl_volume *v = grow(l->v, l->n, sizeof(*v));

	if (!v)
		return -ENOMEM;
	l->v = v;
	if (ctrl_volume_of(&((const struct ec2_volume *)items)[i], NULL, 0, true, &v[l->n]) < 0)
		return -ENOMEM;
	l->n++;
	return 0;
}

static void free_volumes(void *items, size_t n)
{
	ec2_volumes_free(items, n);
}

static const struct pager volume_pager = {"listing volumes", fetch_volumes, add_volume,
					  free_volumes};

void csi_ctrl_volume_list_release(struct csi_ctrl_volume_list *l)
{
	for (size_t i = 0; l && i < l->n; i++)
		csi_ctrl_volume_release(&l->v[i]);
	if (l) {
		free(l->v);
		free(l->next_token);
		*l = (struct csi_ctrl_volume_list){0};
	}
}

enum csi_code csi_ctrl_list_volumes(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				    const struct csi_ctrl_page_req *req,
				    struct csi_ctrl_volume_list *ret, struct csi_error *err)
{
	*ret = (struct csi_ctrl_volume_list){0};
	if (req->max_entries < 0)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "max_entries must not be negative");
	if (list_pages(c, &volume_pager, NULL, req, ret, &ret->next_token, err) != CSI_OK)
		csi_ctrl_volume_list_release(ret);
	return err->code;
}

/* ---- ListSnapshots ---- */

static int fetch_snapshots(struct csi_ctrl *c, const void *src, const char *token, int max,
			   void **ret, size_t *ret_n, char **ret_next, struct aws_error *err)
{
	struct ec2_snapshot *s = NULL;
	int r = ec2_list_snapshots(c, src, token, max, &s, ret_n, ret_next, err);

	*ret = s;
	return r;
}

static int add_snapshot(void *out, const void *items, size_t i)
{
	struct csi_ctrl_snapshot_list *l = out;
	struct csi_ctrl_snapshot *s = grow(l->s, l->n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	l->s = s;
	ctrl_snapshot_of(&((const struct ec2_snapshot *)items)[i], &s[l->n++]);
	return 0;
}

static void free_snapshots(void *items, size_t n)
{
	ec2_snapshots_free(items, n);
}

static const struct pager snapshot_pager = {"listing snapshots", fetch_snapshots, add_snapshot,
					    free_snapshots};

void csi_ctrl_snapshot_list_release(struct csi_ctrl_snapshot_list *l)
{
	if (!l)
		return;
	free(l->s);
	free(l->next_token);
	*l = (struct csi_ctrl_snapshot_list){0};
}

/* One snapshot by id: not found is an empty list, not an error (CSI spec). */
static enum csi_code list_one_snapshot(struct csi_ctrl *c, const char *snapshot_id,
				       const char *source_volume_id,
				       struct csi_ctrl_snapshot_list *ret, struct csi_error *err)
{
	struct ec2_snapshot s = {0};
	struct aws_error aerr = {0};
	int r = ec2_describe_snapshot(c, snapshot_id, &s, &aerr);

	if (r < 0 && r != -ENOENT)
		return ctrl_aws_fail(err, r, &aerr, "looking up the snapshot", CSI_INTERNAL,
				     CSI_INTERNAL);
	csi_error_ok(err);
	if (r == 0 && (!*source_volume_id || strcmp(s.volume, source_volume_id) == 0) &&
	    add_snapshot(ret, &s, 0) < 0)
		csi_error_set(err, CSI_RESOURCE_EXHAUSTED, "out of memory");
	ec2_snapshot_release(&s);
	return err->code;
}

enum csi_code csi_ctrl_list_snapshots(struct csi_ctrl *c, const struct csi_ctrl_call *call,
				      const struct csi_ctrl_page_req *req, const char *snapshot_id,
				      const char *source_volume_id,
				      struct csi_ctrl_snapshot_list *ret, struct csi_error *err)
{
	*ret = (struct csi_ctrl_snapshot_list){0};
	if (req->max_entries < 0)
		return csi_error_set(err, CSI_INVALID_ARGUMENT, "max_entries must not be negative");
	/* a malformed id names no snapshot: an empty list, as for one that does not exist */
	if ((*snapshot_id && !aws_snapshot_id_valid(snapshot_id)) ||
	    (*source_volume_id && !aws_volume_id_valid(source_volume_id)))
		return csi_error_ok(err);
	if (*snapshot_id)
		list_one_snapshot(c, snapshot_id, source_volume_id, ret, err);
	else
		list_pages(c, &snapshot_pager, *source_volume_id ? source_volume_id : NULL, req,
			   ret, &ret->next_token, err);
	if (err->code != CSI_OK)
		csi_ctrl_snapshot_list_release(ret);
	return err->code;
}
