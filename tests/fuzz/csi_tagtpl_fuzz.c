/* libFuzzer harness over the tag templates of csi-controller (csi_controller_tagtpl.c): the
 * first byte picks the props (a PV's or a VolumeSnapshot's names, empty or long ones), the rest
 * is the value of a tagSpecification parameter. Every input is evaluated; a result must be
 * NUL-terminated and within the output cap, a failure must say why. Run with
 * tests/fuzz/ci.sh csi_tagtpl_fuzz. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "modules/csi-controller/csi_controller_tagtpl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char long_name[300];
	const char *pv[3] = {"ebs-claim", "ns-prod-abcdef", "pvc-0123-4567"};
	const char *snap[3] = {"nightly", "prod", "snapcontent-1"};
	const char *empty[3] = {NULL, "", NULL};
	const char *longs[3] = {long_name, long_name, long_name};
	const char *const *sets[] = {pv, snap, empty, longs};
	char err[256] = "", *out = NULL;

	if (size < 1)
		return 0;
	memset(long_name, 'n', sizeof(long_name) - 1);
	unsigned pick = data[0] % 4;
	const struct csi_tagtpl_props props = {
	    pick == 1 ? CSI_TAGTPL_SNAPSHOT_TYPE : CSI_TAGTPL_PV_TYPE,
	    pick == 1 ? csi_tagtpl_snapshot_fields : csi_tagtpl_pv_fields, sets[pick], 3};
	char *in = malloc(size);
	if (!in)
		return 0;
	memcpy(in, data + 1, size - 1);
	in[size - 1] = 0;
	int r = csi_tagtpl_eval(in, &props, &out, err, sizeof(err));
	if (r == 0 && strlen(out) > CSI_TAGTPL_MAX_OUT)
		abort();
	if (r < 0 && !err[0])
		abort();
	free(out);
	free(in);
	return 0;
}
