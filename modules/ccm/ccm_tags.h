/* The tagging controller's pure pieces (upstream's pkg/controllers/tagging): the tag set of
 * --tags with its checksum, the --resources check, the batch planner and the reading of a
 * NotFound error. Nothing here makes a call; tests/unit/test_ccm_tags.c covers it.
 *
 * The checksum is upstream's: the MD5, in lower-case hex, of the "key=value" pairs sorted and
 * joined with ",". The controller writes it as the value of the Node label
 * k8s.io/cloud-provider-aws once the Node's instance carries the tags, and tags again only a
 * Node whose label differs (so a restart does not tag again, and a changed --tags does). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define CCM_TAGGING_LABEL "k8s.io/cloud-provider-aws"
#define CCM_TAGGING_CHECKSUM_LEN 32 /* hex digits */
/* upstream: the keys are labels' too (a cache-hit check), so at most 63 characters */
#define CCM_TAGGING_KEY_MAX 63
#define CCM_TAGGING_VALUE_MAX 256 /* AWS: a tag value has at most 256 characters */
#define CCM_TAGGING_MAX_TAGS 50	  /* AWS: at most 50 tags per resource */

struct ccm_tagset {
	char **keys; /* sorted by "key=value", as the checksum wants them */
	char **values;
	size_t n;
	char checksum[CCM_TAGGING_CHECKSUM_LEN + 1];
};

/* The tag set of --tags ("key=value" items; a later item with the same key wins, as pflag's
 * StringToString). Rejected, with upstream's sentence in err where upstream has one: no tag,
 * a key of more than 63 characters or one AWS does not allow, a value of more than 256, more
 * than 50 tags. */
int ccm_tagset_parse(char *const *items, struct ccm_tagset *ret, char *err, size_t errlen);
void ccm_tagset_release(struct ccm_tagset *t);
/* The checksum of n pairs, in any order (sorted here), into out (33 bytes). */
int ccm_tags_checksum(const char *const *keys, const char *const *values, size_t n, char *out);

/* --resources: not empty, and every item a supported resource ("instance"). */
int ccm_tagging_resources_check(char *const *list, char *err, size_t errlen);

/* The batch planner: which candidates one AWS call covers. cand[own] (the key being
 * reconciled) comes first when it is eligible, then the others in order; ineligible ones
 * (claimed by another worker's batch, done, waiting) are skipped; a candidate whose ID an
 * earlier pick already has rides along without counting. At most max distinct IDs. The
 * indexes go to out (room for n); returns how many, and the distinct IDs to *ret_ids. */
struct ccm_tag_cand {
	const char *id; /* the instance ID */
	bool eligible;
};
size_t ccm_tag_plan(const struct ccm_tag_cand *cand, size_t n, size_t own, size_t max,
		    size_t *out, size_t *ret_ids);

/* A NotFound error of a call over several IDs (CreateTags fails as a whole when one is
 * unknown: "The instance ID 'i-a' does not exist", "The instance IDs 'i-a, i-b' do not
 * exist"): marks in named[] the IDs of ids[] that msg names, and returns how many. */
size_t ccm_tag_notfound_ids(const char *msg, const char *const *ids, size_t n, bool *named);
