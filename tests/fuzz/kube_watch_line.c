/* libFuzzer harness: one line of a watch stream, as kube_watch_decode takes it. Every input
 * gives an event with an object, or an error, never a crash. Run with tests/fuzz/run_kube.sh. */
#include <stddef.h>
#include <stdint.h>

#include "common/kube/watch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum kube_event_type t;
	struct kube_status st;
	cJSON *obj = NULL;

	if (kube_watch_decode((const char *)data, size, &t, &obj, &st) == 0) {
		if (!cJSON_IsObject(obj) || t > KUBE_EVENT_BOOKMARK)
			__builtin_trap();
		cJSON_Delete(obj);
	}
	return 0;
}
