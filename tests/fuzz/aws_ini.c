/* libFuzzer harness: the shared config / credentials file reader. Run with
 * tests/fuzz/run_aws.sh. */
#include <stddef.h>
#include <stdint.h>

#include "common/aws/creds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct aws_ini *ini = NULL;

	for (int style = 0; style < 2; style++) {
		if (aws_ini_parse((const char *)data, size, style, &ini) == 0) {
			(void)aws_ini_get(ini, "default", "region");
			(void)aws_ini_get(ini, "dev", "role_arn");
			(void)aws_ini_has_section(ini, "profile dev");
			aws_ini_free(ini);
		}
	}
	return 0;
}
