/* aws-k8s nth: IMDS mode. Every poll interval (2 s) the four monitors read the instance metadata
 * (spot/instance-action, events/maintenance/scheduled, events/recommendations/rebalance,
 * autoscaling/target-lifecycle-state) into a small store of events keyed by event ID; an event
 * is handled once it is due (now >= start - NODE_TERMINATION_GRACE_PERIOD). A drain that did not
 * finish (a PodDisruptionBudget) is tried again 10 s later, never in a hot loop and never by
 * exiting. A canceled or completed scheduled event uncordons the node when no other handled event
 * holds it (handled: drained, or tried and blocked). The event uncordoned after a reboot at
 * startup is ignored, as upstream does: it can still be listed active. A malformed or failing
 * answer is logged once per distinct error (again after a good answer, a 404 included), counted
 * in events_error_total, and changes nothing: upstream's panic after four identical errors is
 * not copied. Event IDs are upstream's (the same taint and label values). */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/aws/imds.h"
#include "common/base/buf.h"
#include "common/base/cancel.h"
#include "common/base/json.h"
#include "common/base/log.h"
#include "common/base/timeutil.h"
#include "modules/nth/nth.h"

#define STORE_MAX 64
#define RETRY_NS (10 * 1000000000LL)

enum ev_state { EV_PENDING, EV_DONE, EV_CANCELED };

struct stored {
	struct nth_event ev;
	enum ev_state state;
	bool attempted;	       /* handled at least once: the node may be cordoned */
	int64_t retry_at_mono; /* after a failed attempt */
};

enum monitor { MON_SPOT, MON_SCHEDULED, MON_REBALANCE, MON_ASG, MON_COUNT };

struct imds_run {
	struct nth *n;
	struct stored store[STORE_MAX];
	size_t len;
	char last_err[MON_COUNT][160];
};

static const char *const mon_names[MON_COUNT] = { "spot-itn-monitor", "scheduled-event-monitor",
						   "rebalance-recommendation-monitor",
						   "asg-lifecycle-monitor" };

/* Logs a monitor's error once until it changes or a poll succeeds. */
static void mon_error(struct imds_run *s, enum monitor m, const char *what, int r)
{
	char msg[160];

	str_printf(msg, sizeof(msg), "%s: %s", what, r ? errno_name(-r) : "");
	nth_metric_error(mon_names[m]);
	if (strcmp(msg, s->last_err[m]) == 0)
		return;
	str_copy(s->last_err[m], sizeof(s->last_err[m]), msg);
	log_error("metadata monitor failed; nothing done", KV_S("monitor", mon_names[m]),
		  KV_S("error", what), KV_E(r ? r : -EBADMSG));
}

static void mon_ok(struct imds_run *s, enum monitor m)
{
	if (s->last_err[m][0])
		log_info("metadata monitor recovered", KV_S("monitor", mon_names[m]));
	s->last_err[m][0] = '\0';
}

static void sha256_hex(const char *s, char *out, size_t n)
{
	unsigned char md[32];
	unsigned int len = 0;

	if (n < 65 || !EVP_Digest(s, strlen(s), md, &len, EVP_sha256(), NULL)) {
		if (n)
			out[0] = '\0';
		return;
	}
	for (unsigned i = 0; i < len; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static struct stored *find(struct imds_run *s, const char *id)
{
	for (size_t i = 0; i < s->len; i++)
		if (strcmp(s->store[i].ev.event_id, id) == 0)
			return &s->store[i];
	return NULL;
}

/* Adds ev unless its ID is known; the oldest finished entry makes room when the store is full.
 * The entry added, or NULL. */
static struct stored *add(struct imds_run *s, const struct nth_event *ev)
{
	struct stored *st = find(s, ev->event_id);

	if (st)
		return NULL;
	if (s->len == STORE_MAX) {
		size_t i;
		for (i = 0; i < s->len && s->store[i].state == EV_PENDING; i++)
			;
		if (i == s->len) {
			log_error("too many pending interruption events; ignoring one",
				  KV_S("event", ev->event_id));
			return NULL;
		}
		memmove(&s->store[i], &s->store[i + 1], (s->len - i - 1) * sizeof(s->store[0]));
		s->len--;
	}
	st = &s->store[s->len++];
	*st = (struct stored){ .ev = *ev, .state = EV_PENDING };
	if (strcmp(ev->state, "canceled") != 0 && strcmp(ev->state, "completed") != 0)
		log_info("interruption event received", KV_S("kind", nth_kind_name(ev->kind)),
			 KV_S("event", ev->event_id), KV_S("description", ev->description));
	return st;
}

static void new_event(struct imds_run *s, struct nth_event *ev, enum nth_kind kind)
{
	*ev = (struct nth_event){ .kind = kind };
	str_copy(ev->node_name, sizeof(ev->node_name), s->n->cfg->node_name);
	str_copy(ev->instance_id, sizeof(ev->instance_id), s->n->instance_id);
	str_copy(ev->instance_type, sizeof(ev->instance_type), s->n->instance_type);
}

/* GETs a metadata path. 1 with the body, 0 for a 404 (no notice: a good answer too), or -errno
 * after logging. */
static int get(struct imds_run *s, enum monitor m, const char *path, struct buf *out)
{
	int r = aws_imds_get_buf(s->n->imds, path, out);

	if (r == -ENOENT) {
		mon_ok(s, m);
		return 0;
	}
	if (r == -ECANCELED) /* stopping: not the metadata's fault */
		return r;
	if (r < 0) {
		mon_error(s, m, path, r);
		return r;
	}
	if (buf_putc(out, '\0') < 0)
		return -ENOMEM;
	return 1;
}

static void poll_spot(struct imds_run *s)
{
	struct buf b;
	cJSON *j = NULL;
	int64_t t;
	int r;

	buf_init(&b, 64 * 1024);
	if ((r = get(s, MON_SPOT, "meta-data/spot/instance-action", &b)) <= 0)
		goto out;
	const char *action, *when;
	if (json_parse(b.data, b.len - 1, &j, NULL) < 0 || !cJSON_IsObject(j) ||
	    !(action = json_str(j, "action")) || !(when = json_str(j, "time")) ||
	    rfc3339_parse(when, &t) < 0) {
		mon_error(s, MON_SPOT, "spot/instance-action is not {\"action\",\"time\"} JSON", 0);
		goto out;
	}
	struct nth_event ev;
	char hex[72], key[160];
	new_event(s, &ev, NTH_KIND_SPOT_ITN);
	/* upstream hashes Go's %v of the decoded *InstanceAction: "&{terminate 2020-...}" */
	str_printf(key, sizeof(key), "&{%s %s}", action, when);
	sha256_hex(key, hex, sizeof(hex));
	str_printf(ev.event_id, sizeof(ev.event_id), "spot-itn-%s", hex);
	str_printf(ev.description, sizeof(ev.description),
		   "Spot ITN received. Instance will be interrupted at %s (action %s)", when, action);
	ev.start_ns = t;
	mon_ok(s, MON_SPOT);
	add(s, &ev);
out:
	cJSON_Delete(j);
	buf_release(&b);
}

/* "2 Jan 2006 15:04:05 GMT" */
static int parse_event_time(const char *s, int64_t *ret)
{
	struct tm tm = { 0 };
	const char *end;

	if (!s || !(end = strptime(s, "%d %b %Y %H:%M:%S GMT", &tm)) || *end)
		return -EINVAL;
	*ret = (int64_t)timegm(&tm) * 1000000000LL;
	return 0;
}

static bool restart_code(const char *code)
{
	static const char *const codes[] = { "instance-stop", "system-reboot", "instance-reboot",
					     "instance-retirement" };
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(code, codes[i]) == 0)
			return true;
	return false;
}

/* An active handled event other than except still holds the node. */
static bool other_active(struct imds_run *s, const struct stored *except)
{
	for (size_t i = 0; i < s->len; i++)
		if (&s->store[i] != except && s->store[i].state != EV_CANCELED)
			return true;
	return false;
}

static void cancel_one(struct imds_run *s, struct stored *st, const char *state)
{
	/* a drain that did not finish (a PDB) has cordoned and tainted the node all the same */
	bool was_done = st->state == EV_DONE || st->attempted;

	str_copy(st->ev.state, sizeof(st->ev.state), state);
	st->state = EV_CANCELED;
	if (!was_done) {
		log_info("interruption event canceled before it was handled",
			 KV_S("event", st->ev.event_id), KV_S("state", state));
		return;
	}
	if (other_active(s, st)) {
		log_info("event canceled, but another event still holds the node",
			 KV_S("event", st->ev.event_id));
		return;
	}
	if (nth_cancel_event(s->n, &st->ev) < 0) {
		st->state = EV_DONE; /* try the uncordon again at the next poll */
		st->ev.state[0] = '\0';
	}
}

/* A canceled or completed event this run never saw active: an earlier run may have cordoned the
 * node for it (the event changed while nth was down). Looked at once: uncordon when the node
 * carries its event-id label. */
static void cancel_unknown(struct imds_run *s, struct nth_event *ev)
{
	int r = nth_node_marked(s->n, ev);

	if (r < 0) {
		log_v(2, "cannot read the node; looking at the canceled event again later",
		      KV_S("event", ev->event_id), KV_E(r));
		return;
	}
	if (r > 0) {
		log_info("an event handled before this run was canceled",
			 KV_S("event", ev->event_id), KV_S("state", ev->state));
		if (other_active(s, NULL))
			log_info("event canceled, but another event still holds the node",
				 KV_S("event", ev->event_id));
		else if (nth_cancel_event(s->n, ev) < 0)
			return; /* try again at the next poll */
	}
	struct stored *st = add(s, ev);
	if (st)
		st->state = EV_CANCELED;
}

static void poll_scheduled(struct imds_run *s)
{
	struct buf b;
	cJSON *j = NULL, *it;
	int r;

	buf_init(&b, 256 * 1024);
	if ((r = get(s, MON_SCHEDULED, "meta-data/events/maintenance/scheduled", &b)) <= 0)
		goto out;
	if (json_parse(b.data, b.len - 1, &j, NULL) < 0 || !cJSON_IsArray(j)) {
		mon_error(s, MON_SCHEDULED, "events/maintenance/scheduled is not a JSON array", 0);
		goto out;
	}
	cJSON_ArrayForEach(it, j)
	{
		const char *code = json_str(it, "Code"), *id = json_str(it, "EventId"),
			   *state = json_str(it, "State"), *nb = json_str(it, "NotBefore"),
			   *na = json_str(it, "NotAfter");
		int64_t t0, t1 = 0;
		if (!code || !id || !state || parse_event_time(nb, &t0) < 0 ||
		    (na && parse_event_time(na, &t1) < 0)) {
			mon_error(s, MON_SCHEDULED, "a scheduled event lacks Code, EventId, State or "
						    "a valid NotBefore/NotAfter",
				  0);
			goto out;
		}
	}
	mon_ok(s, MON_SCHEDULED);
	cJSON_ArrayForEach(it, j)
	{
		const char *code = json_str(it, "Code"), *id = json_str(it, "EventId"),
			   *state = json_str(it, "State"), *desc = json_str(it, "Description"),
			   *nb = json_str(it, "NotBefore"), *na = json_str(it, "NotAfter");
		struct stored *st = find(s, id);
		struct nth_event ev;
		new_event(s, &ev, NTH_KIND_SCHEDULED);
		str_copy(ev.event_id, sizeof(ev.event_id), id);
		str_copy(ev.state, sizeof(ev.state), state);
		str_copy(ev.code, sizeof(ev.code), code);
		if (strcmp(state, "canceled") == 0 || strcmp(state, "completed") == 0) {
			if (st && st->state != EV_CANCELED)
				cancel_one(s, st, state);
			else if (!st)
				cancel_unknown(s, &ev);
			continue;
		}
		str_printf(ev.description, sizeof(ev.description),
			   "%s will occur between %s and %s because %s", code, nb, na ? na : "",
			   desc ? desc : "");
		ev.start_ns = now_real_ns(); /* as upstream: drain as soon as it is seen */
		if (na)
			parse_event_time(na, &ev.end_ns);
		ev.uncordon_after_reboot = restart_code(code);
		add(s, &ev);
	}
out:
	cJSON_Delete(j);
	buf_release(&b);
}

static void poll_rebalance(struct imds_run *s)
{
	struct buf b;
	cJSON *j = NULL;
	const char *when;
	int64_t t;

	buf_init(&b, 64 * 1024);
	if (get(s, MON_REBALANCE, "meta-data/events/recommendations/rebalance", &b) <= 0)
		goto out;
	if (json_parse(b.data, b.len - 1, &j, NULL) < 0 || !(when = json_str(j, "noticeTime")) ||
	    rfc3339_parse(when, &t) < 0) {
		mon_error(s, MON_REBALANCE, "events/recommendations/rebalance is not "
					    "{\"noticeTime\"} JSON",
			  0);
		goto out;
	}
	struct nth_event ev;
	char hex[72], key[96];
	new_event(s, &ev, NTH_KIND_REBALANCE);
	/* upstream hashes Go's %v of the decoded *RebalanceRecommendation: "&{2020-...}" */
	str_printf(key, sizeof(key), "&{%s}", when);
	sha256_hex(key, hex, sizeof(hex));
	str_printf(ev.event_id, sizeof(ev.event_id), "rebalance-recommendation-%s", hex);
	str_printf(ev.description, sizeof(ev.description),
		   "Rebalance recommendation received. Instance rebalance recommended at %s", when);
	ev.start_ns = t;
	ev.cordon_only = !s->n->cfg->enable_rebalance_draining;
	mon_ok(s, MON_REBALANCE);
	add(s, &ev);
out:
	cJSON_Delete(j);
	buf_release(&b);
}

static void poll_asg(struct imds_run *s)
{
	struct buf b;

	buf_init(&b, 4096);
	if (get(s, MON_ASG, "meta-data/autoscaling/target-lifecycle-state", &b) <= 0)
		goto out;
	/* plain text: trailing white space is not part of the state */
	while (b.len > 1 && (b.data[b.len - 2] == '\n' || b.data[b.len - 2] == ' '))
		b.data[--b.len - 1] = '\0';
	mon_ok(s, MON_ASG);
	if (strcmp(b.data, "Terminated") != 0)
		goto out;
	/* one event per instance (upstream makes a new one on every poll, draining again and
	 * again) */
	struct nth_event ev;
	char hex[72];
	new_event(s, &ev, NTH_KIND_ASG_LIFECYCLE);
	sha256_hex(s->n->instance_id, hex, sizeof(hex));
	str_printf(ev.event_id, sizeof(ev.event_id), "target-lifecycle-state-terminated-%.32s", hex);
	str_copy(ev.description, sizeof(ev.description),
		 "AST target lifecycle state received. Instance will be terminated");
	ev.start_ns = now_real_ns();
	add(s, &ev);
out:
	buf_release(&b);
}

/* Handles the due events, one at a time (one node). */
static void handle_due(struct imds_run *s)
{
	int64_t grace = s->n->cfg->node_termination_grace_s * 1000000000LL;

	for (size_t i = 0; i < s->len && !cancel_is_cancelled(s->n->cancel); i++) {
		struct stored *st = &s->store[i];
		if (st->state != EV_PENDING || now_real_ns() < st->ev.start_ns - grace ||
		    now_mono_ns() < st->retry_at_mono)
			continue;
		st->attempted = true;
		int r = nth_handle_event(s->n, &st->ev);
		if (r == 0) {
			st->state = EV_DONE;
		} else if (r != -ECANCELED) {
			st->retry_at_mono = now_mono_ns() + RETRY_NS;
			log_info("interruption event not done; trying again later",
				 KV_S("event", st->ev.event_id), KV_I("retry_in_s", RETRY_NS / 1000000000LL),
				 KV_E(r));
		}
	}
}

int nth_imds_run(struct nth *n)
{
	const struct nth_config *c = n->cfg;
	struct imds_run *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->n = n;
	if (n->rebooted_event_id[0]) {
		/* uncordoned after the reboot it announced: the event can still be listed active */
		struct stored *st = &s->store[s->len++];
		str_copy(st->ev.event_id, sizeof(st->ev.event_id), n->rebooted_event_id);
		st->state = EV_CANCELED;
	}
	log_info("started the IMDS monitors", KV_B("spot", c->enable_spot_itn),
		 KV_B("scheduled", c->enable_scheduled),
		 KV_B("rebalance", c->enable_rebalance_monitoring || c->enable_rebalance_draining),
		 KV_B("asg_lifecycle", c->enable_asg_lifecycle),
		 KV_D("poll_interval_s", (double)c->poll_interval_ns / 1e9));
	while (!cancel_is_cancelled(n->cancel)) {
		if (c->enable_spot_itn)
			poll_spot(s);
		if (c->enable_scheduled)
			poll_scheduled(s);
		if (c->enable_rebalance_monitoring || c->enable_rebalance_draining)
			poll_rebalance(s);
		if (c->enable_asg_lifecycle)
			poll_asg(s);
		handle_due(s);
		if (cancel_wait(n->cancel, c->poll_interval_ns))
			break;
	}
	free(s);
	return 0;
}
