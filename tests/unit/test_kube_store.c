/* The hash table, the store and its indexes, relist sweeps, projections. */
#include <stdlib.h>

#include "common/base/buf.h"
#include "common/base/json.h"
#include "common/kube/frozen.h"
#include "common/kube/informer.h"
#include "common/kube/kmap.h"
#include "common/kube/store.h"
#include "tests/unit/harness.h"

TEST(kube_kmap_basics)
{
	struct kmap m = KMAP_INIT;
	char key[32];
	void *old = (void *)1;
	size_t i, n = 0;

	for (int k = 0; k < 1000; k++) {
		snprintf(key, sizeof(key), "key-%d", k);
		ASSERT_OK(kmap_put(&m, key, (void *)(intptr_t)(k + 1), NULL));
	}
	ASSERT_EQ(m.size, 1000);
	ASSERT_EQ((intptr_t)kmap_get(&m, "key-500"), 501);
	ASSERT_OK(kmap_put(&m, "key-500", (void *)7, &old));
	ASSERT_EQ((intptr_t)old, 501);
	ASSERT_EQ(m.size, 1000);
	ASSERT_EQ((intptr_t)kmap_remove(&m, "key-1"), 2);
	ASSERT_NULL(kmap_remove(&m, "key-1"));
	ASSERT_NULL(kmap_get(&m, "nope"));
	for (struct kmap_entry *e = kmap_first(&m, &i); e; e = kmap_next(&m, e, &i))
		n++;
	ASSERT_EQ(n, 999);
	kmap_clear(&m, NULL);
	ASSERT_EQ(m.size, 0);
	ASSERT_NULL(kmap_get(&m, "key-2"));
}

static struct kube_obj *pod(const char *ns, const char *name, const char *node, const char *rv)
{
	cJSON *j = cJSON_CreateObject();
	json_set_str(j, "metadata.name", name);
	json_set_str(j, "metadata.namespace", ns);
	json_set_str(j, "metadata.resourceVersion", rv);
	if (node)
		json_set_str(j, "spec.nodeName", node);
	return kube_obj_new(j);
}

static size_t count_index(struct kube_store *s, const char *idx, const char *v)
{
	struct kube_obj **objs = NULL;
	size_t n = 0;
	if (kube_store_by_index(s, idx, v, &objs, &n) < 0)
		return 9999;
	kube_objv_free(objs, n);
	return n;
}

TEST(kube_store_put_get_index)
{
	static const struct kube_indexer idx[] = {{"node", kube_index_by_node_name},
						  {"ns", kube_index_by_namespace}};
	struct kube_store *s;
	struct kube_obj *o = NULL, *old = NULL;

	ASSERT_OK(kube_store_new(idx, 2, &s));
	ASSERT_OK(kube_store_put(s, pod("a", "p1", "n1", "1"), NULL));
	ASSERT_OK(kube_store_put(s, pod("a", "p2", "n1", "2"), NULL));
	ASSERT_OK(kube_store_put(s, pod("b", "p1", "n2", "3"), NULL));
	ASSERT_OK(kube_store_put(s, pod("b", "p3", NULL, "4"), NULL));
	ASSERT_EQ(kube_store_len(s), 4);
	ASSERT_OK(kube_store_get(s, "b/p1", &o));
	ASSERT_STREQ(json_str(o->json, "metadata.resourceVersion"), "3");
	ASSERT_EQ(count_index(s, "node", "n1"), 2);
	ASSERT_EQ(count_index(s, "node", "n2"), 1);
	ASSERT_EQ(count_index(s, "node", "none"), 0);
	ASSERT_EQ(count_index(s, "ns", "b"), 2);
	ASSERT_EQ(count_index(s, "nope", "b"), 9999);

	/* an update moves the object between index values; a reader keeps the old object */
	ASSERT_OK(kube_store_put(s, pod("b", "p1", "n1", "5"), &old));
	ASSERT_TRUE(old == o);
	kube_obj_unref(old);
	ASSERT_STREQ(json_str(o->json, "metadata.resourceVersion"), "3");
	kube_obj_unref(o);
	ASSERT_EQ(count_index(s, "node", "n1"), 3);
	ASSERT_EQ(count_index(s, "node", "n2"), 0);

	ASSERT_OK(kube_store_delete(s, "a/p2", NULL));
	ASSERT_ERR(kube_store_delete(s, "a/p2", NULL), ENOENT);
	ASSERT_ERR(kube_store_get(s, "a/p2", &o), ENOENT);
	ASSERT_EQ(count_index(s, "node", "n1"), 2);

	_cleanup_strv_ char **keys = NULL;
	ASSERT_OK(kube_store_keys(s, &keys));
	ASSERT_EQ(strv_len(keys), 3);
	ASSERT_TRUE(strv_contains(keys, "b/p3"));
	kube_store_free(s);
}

TEST(kube_store_replace_sweeps_what_is_gone)
{
	static const struct kube_indexer idx[] = {{"node", kube_index_by_node_name}};
	struct kube_store *s;
	struct kube_obj **gone = NULL;
	size_t n = 0;

	ASSERT_OK(kube_store_new(idx, 1, &s));
	ASSERT_OK(kube_store_put(s, pod("a", "keep", "n1", "1"), NULL));
	ASSERT_OK(kube_store_put(s, pod("a", "gone", "n1", "2"), NULL));
	kube_store_begin_replace(s);
	ASSERT_OK(kube_store_put(s, pod("a", "keep", "n1", "3"), NULL));
	ASSERT_OK(kube_store_put(s, pod("a", "new", "n2", "4"), NULL));
	ASSERT_OK(kube_store_sweep(s, &gone, &n));
	ASSERT_EQ(n, 1);
	ASSERT_STREQ(json_str(gone[0]->json, "metadata.name"), "gone");
	kube_objv_free(gone, n);
	ASSERT_EQ(kube_store_len(s), 2);
	ASSERT_EQ(count_index(s, "node", "n1"), 1);
	kube_store_free(s);
}

TEST(kube_store_keys_of_objects)
{
	char key[KUBE_KEY_MAX];
	cJSON *j = cJSON_Parse("{\"metadata\":{\"name\":\"n1\"}}");

	ASSERT_OK(kube_obj_key(j, key, sizeof(key)));
	ASSERT_STREQ(key, "n1");
	json_set_str(j, "metadata.namespace", "ns");
	ASSERT_OK(kube_obj_key(j, key, sizeof(key)));
	ASSERT_STREQ(key, "ns/n1");
	cJSON_Delete(j);
	j = cJSON_Parse("{\"metadata\":{}}");
	ASSERT_ERR(kube_obj_key(j, key, sizeof(key)), EINVAL);
	cJSON_Delete(j);
}

TEST(kube_store_projection_and_strip)
{
	cJSON *j = cJSON_Parse("{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\","
			       "\"resourceVersion\":\"9\",\"labels\":{\"a\":\"b\"},"
			       "\"managedFields\":[{\"manager\":\"kubectl\"}]},"
			       "\"spec\":{\"nodeName\":\"x\",\"containers\":[{\"name\":\"c\"}]},"
			       "\"status\":{\"phase\":\"Running\"}}");
	static const char *const paths[] = {"metadata.labels", "spec.nodeName", "status.phase",
					    "status.missing", NULL};

	kube_strip_managed_fields(j);
	ASSERT_NULL(json_find(j, "metadata.managedFields"));
	cJSON *p = kube_project(j, paths);
	_cleanup_free_ char *s = json_print(p);
	ASSERT_STREQ(s,
		     "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"resourceVersion\":\"9\","
		     "\"labels\":{\"a\":\"b\"}},\"spec\":{\"nodeName\":\"x\"},"
		     "\"status\":{\"phase\":\"Running\"}}");
	cJSON_Delete(p);
	cJSON_Delete(j);
}

TEST(kube_store_frozen_json_reads_like_the_tree)
{
	static const char text[] =
	    "{\"metadata\":{\"name\":\"p\",\"labels\":{\"a\":\"b\",\"c\":\"\"}},\"spec\":{\"n\":3,"
	    "\"f\":1.5,\"ok\":true,\"none\":null,\"list\":[1,\"x\",{\"k\":[]},[]],\"e\":{}}}";
	cJSON *t = cJSON_Parse(text), *t2 = cJSON_Parse(text);
	cJSON *f = kube_json_freeze(t), *f2 = kube_json_freeze(t2);
	_cleanup_free_ char *s = json_print(f);

	ASSERT_NOT_NULL(f);
	ASSERT_STREQ(s, text);
	ASSERT_STREQ(json_str(f, "metadata.labels.a"), "b");
	ASSERT_STREQ(json_str(f, "spec.list.1"), "x");
	ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(f, "spec")), 6);
	ASSERT_TRUE(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(f, "spec"), "none")));
	/* keys are shared between objects */
	ASSERT_TRUE(cJSON_GetObjectItem(f, "metadata")->string ==
		    cJSON_GetObjectItem(f2, "metadata")->string);
	/* a duplicate of a frozen object is an ordinary tree */
	cJSON *d = cJSON_Duplicate(f, true);
	_cleanup_free_ char *ds = json_print(d);
	ASSERT_STREQ(ds, text);
	cJSON_Delete(d);
	ASSERT_LT(kube_json_frozen_size(t), 28 * sizeof(cJSON));
	cJSON_Delete(t);
	cJSON_Delete(t2);
	free(f);
	free(f2);
}
