/* libFuzzer harness: kubeconfig parsing (YAML through libyaml, then the kubeconfig fields).
 * Every input must give either a configuration or an error message, never a crash, a leak or
 * undefined behaviour. Run with tests/fuzz/run_kube.sh. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/kube/config.h"
#include "common/kube/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kube_config *c = NULL;
	cJSON *v = NULL;
	char err[512];

	if (kube_config_parse((const char *)data, size, "/fuzz/dir/config", NULL, &c, err,
			      sizeof(err)) == 0) {
		if (!c->server || strncmp(c->server, "http", 4) != 0)
			__builtin_trap();
		kube_config_free(c);
	} else if (!err[0])
		__builtin_trap(); /* every failure explains itself */
	if (kube_yaml_parse((const char *)data, size, KUBE_YAML_TYPED, &v, err, sizeof(err)) == 0)
		cJSON_Delete(v);
	return 0;
}
