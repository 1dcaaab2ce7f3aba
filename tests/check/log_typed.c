/* The typed log API, compiled by tests/check/log_typed.sh: with -DCASE=0 every form of call must
 * compile cleanly with the project's warnings (the positive control); each CASE from 1 on is a
 * mistake the compiler must reject. Never linked. */
#include <errno.h>

#include "common/base/log.h"

void log_typed_check(const char *s, int n, const char *p);
void log_typed_check(const char *s, int n, const char *p)
{
#if CASE == 0
	int r = -EIO;
	log_info("no items");
	log_info("every kind", KV_S("s", s), KV_I("i", n), KV_U("u", 1u), KV_D("d", 0.5),
		 KV_B("b", true), KV_E(r));
	log_warn("warn", KV_S("s", s));
	log_error("error", KV_S("s", s));
	log_v(4, "verbose", KV_I("i", n));
	r = log_error_errno(r, "failed", KV_S("s", s));
	(void)r;
	log_info("the most items", KV_I("1", 1), KV_I("2", 2), KV_I("3", 3), KV_I("4", 4),
		 KV_I("5", 5), KV_I("6", 6), KV_I("7", 7), KV_I("8", 8), KV_I("9", 9),
		 KV_I("10", 10), KV_I("11", 11), KV_I("12", 12), KV_I("13", 13), KV_I("14", 14),
		 KV_I("15", 15), KV_I("16", 16), KV_I("17", 17), KV_I("18", 18), KV_I("19", 19),
		 KV_I("20", 20), KV_I("21", 21), KV_I("22", 22), KV_I("23", 23), KV_I("24", 24));
	struct log_kv built[] = { KV_S("s", s), LOG_END };
	log_emit(LOG_INFO, __FILE__, __LINE__, "built at run time", built);
#elif CASE == 1 /* the example: a bare string where an item belongs */
	log_info("x", "oops");
#elif CASE == 2 /* a number */
	log_warn("x", n);
#elif CASE == 3 /* a bare string after a good item */
	log_error("x", KV_S("k", s), p);
#elif CASE == 4 /* the same through log_v */
	log_v(2, "x", s);
#elif CASE == 5 /* and through log_error_errno */
	(void)log_error_errno(-EIO, "x", "oops");
#elif CASE == 6 /* a key and a value without KV_S */
	log_info("x", "key", s);
#elif CASE == 7 /* a value of the wrong type for its KV_ macro */
	log_info("x", KV_S("k", n));
#elif CASE == 8 /* more than LOG_MAX_ITEMS items */
	log_info("x", KV_I("1", 1), KV_I("2", 2), KV_I("3", 3), KV_I("4", 4), KV_I("5", 5),
		 KV_I("6", 6), KV_I("7", 7), KV_I("8", 8), KV_I("9", 9), KV_I("10", 10),
		 KV_I("11", 11), KV_I("12", 12), KV_I("13", 13), KV_I("14", 14), KV_I("15", 15),
		 KV_I("16", 16), KV_I("17", 17), KV_I("18", 18), KV_I("19", 19), KV_I("20", 20),
		 KV_I("21", 21), KV_I("22", 22), KV_I("23", 23), KV_I("24", 24), KV_I("25", 25));
#endif
}
