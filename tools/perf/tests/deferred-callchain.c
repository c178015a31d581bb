// SPDX-License-Identifier: GPL-2.0
/*
 * Samples of events with PERF_SAMPLE_CALLCHAIN_DEFERRED carry the kernel part
 * of their callchain and a cookie; PERF_RECORD_CALLCHAIN_DEFERRED carries the
 * user part. These tests check the join rules on the join engine itself
 * (util/deferred-callchain.c), then through a session reading pipe streams
 * (deferred-stream.c), in both byte orders, with malformed records, and with
 * the join turned off. Nothing here needs a kernel with the feature.
 */
#include <byteswap.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/compiler.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/types.h>
#include <linux/zalloc.h>
#include <perf/event.h>

#include "callchain.h"
#include "data.h"
#include "debug.h"
#include "dso.h"
#include "event.h"
#include "evsel.h"
#include "machine.h"
#include "map.h"
#include "map_symbol.h"
#include "sample.h"
#include "session.h"
#include "symbol.h"
#include "thread.h"
#include "tool.h"
#include "util/deferred-callchain.h"
#include "tests.h"
#include "deferred-stream.h"

/* As a tracepoint's: the raw data goes between the callchain and the cookie */
#define RAW_SAMPLE_TYPE	(SAMPLE_TYPE | PERF_SAMPLE_RAW)

#define JOINED		DEFERRED_CALLCHAIN__JOINED
#define BACKWARD	DEFERRED_CALLCHAIN__BACKWARD
#define AMBIGUOUS	DEFERRED_CALLCHAIN__AMBIGUOUS
#define UNRESOLVED	DEFERRED_CALLCHAIN__UNRESOLVED
#define MAX_DELIVERED	32
#define MAX_RAW		32

/* What a deliver callback saw */
struct delivered {
	u64		time;
	u32		pid, tid;
	u64		cookie;
	unsigned int	flags;
	bool		has_record;
	u64		record_cookie;
	u64		file_offset;
	const void	*event;
	u64		nr;
	u64		ips[MAX_IPS];
	u32		raw_size;
	u8		raw[MAX_RAW];
	/* the session's: the sample's period and id, the index of its evsel */
	u64		period;
	u64		id;
	int		evsel_idx;
};

/* What a test expects a deliver callback to have seen */
struct expect {
	u64		time;
	unsigned int	flags;
	struct ips	chain;
};

/* A sample of @sample_type: with @raw_size bytes of @raw when it has PERF_SAMPLE_RAW. */
static union perf_event *sample__build_raw(union perf_event *event, u64 sample_type,
					   u32 tid, u64 time, u64 cookie,
					   const struct ips *kernel,
					   const void *raw, u32 raw_size)
{
	struct perf_sample sample = {
		.tid	= tid,
		.time	= time,
		.raw_data = (void *)raw,
		.raw_size = raw_size,
		.deferred_cookie = cookie,
	};

	return sample__synthesize(event, sample_type, 0, &sample, kernel);
}

static union perf_event *sample__build(union perf_event *event, u32 tid, u64 time,
				       u64 cookie, const struct ips *kernel)
{
	return sample__build_raw(event, SAMPLE_TYPE, tid, time, cookie, kernel, NULL, 0);
}

static void delivered__set_chain(struct delivered *d, const struct ip_callchain *chain)
{
	u64 nr = chain ? chain->nr : 0;

	d->nr = nr;
	if (nr > MAX_IPS)
		nr = MAX_IPS;
	if (nr)
		memcpy(d->ips, chain->ips, nr * sizeof(u64));
}

static bool chain__equal(const struct delivered *d, const struct ips *chain)
{
	return d->nr == chain->nr &&
	       (!chain->nr || !memcmp(d->ips, chain->ips, chain->nr * sizeof(u64)));
}

static void chain__fprintf(const char *what, u64 nr, const u64 *ips)
{
	pr_debug("    %s chain (%" PRIu64 "):", what, nr);
	for (u64 i = 0; i < nr && i < MAX_IPS; i++)
		pr_debug(" %#" PRIx64, ips[i]);
	pr_debug("\n");
}

/* Checks that exactly @nr_exp samples were delivered, as expected, in this order. */
static int delivered__check(const struct delivered *got, int nr_got,
			    const struct expect *exp, int nr_exp)
{
	if (nr_got != nr_exp) {
		pr_debug("delivered %d samples, expected %d\n", nr_got, nr_exp);
		return TEST_FAIL;
	}
	for (int i = 0; i < nr_exp; i++) {
		const struct delivered *d = &got[i];

		if (d->time == exp[i].time && d->flags == exp[i].flags &&
		    chain__equal(d, &exp[i].chain))
			continue;
		pr_debug("delivery %d: time %" PRIu64 " flags %#x, expected time %" PRIu64
			 " flags %#x\n", i, d->time, d->flags, exp[i].time, exp[i].flags);
		chain__fprintf("got", d->nr, d->ips);
		chain__fprintf("expected", exp[i].chain.nr, exp[i].chain.ips);
		return TEST_FAIL;
	}
	return TEST_OK;
}

/*
 * Engine level: a struct deferred_callchains with a deliver callback that
 * parses what it gets as the session does, and joins it.
 */
struct engine {
	struct deferred_callchains	dc;
	struct evsel			*evsel;
	int				nr;
	struct delivered		delivered[MAX_DELIVERED];
	/* the other events handed on, in order: their times */
	int				nr_other;
	u64				other_times[MAX_DELIVERED];
	/* the time of the last event handed on */
	u64				last_time;
	bool				out_of_order;
};

static const char engine_path[] = "engine";

static int engine__deliver(struct deferred_callchains *dc, union perf_event *event,
			   struct perf_sample *parsed, const union perf_event *record,
			   unsigned int flags, u64 file_offset, const char *file_path)
{
	struct engine *e = dc->priv;
	struct ip_callchain *joined = NULL;
	struct perf_sample sample;
	struct delivered *d;

	if (e->nr == MAX_DELIVERED || e->nr_other == MAX_DELIVERED ||
	    file_path != engine_path)
		return -EINVAL;
	if (parsed) {
		/* the sample handed over must be the event's own */
		if (event->header.type == PERF_RECORD_SAMPLE &&
		    ((void *)parsed->callchain < (void *)event ||
		     (void *)parsed->callchain >= (void *)event + event->header.size))
			return -EINVAL;
		sample = *parsed;
	} else if (evsel__parse_sample(e->evsel, event, &sample)) {
		/* a held copy, parsed as the session does */
		return -EINVAL;
	}
	/* every event in time order, whatever waited */
	if (sample.time < e->last_time)
		e->out_of_order = true;
	e->last_time = sample.time;

	if (event->header.type != PERF_RECORD_SAMPLE) {
		if (record || flags)
			return -EINVAL;
		e->other_times[e->nr_other++] = sample.time;
		return 0;
	}

	d = &e->delivered[e->nr++];
	d->time = sample.time;
	d->pid = sample.pid;
	d->tid = sample.tid;
	d->cookie = sample.deferred_cookie;
	d->flags = flags;
	d->has_record = !!record;
	d->record_cookie = record ? record->callchain_deferred.cookie : 0;
	d->file_offset = file_offset;
	d->event = event;
	if (record) {
		joined = deferred_callchain__join(sample.callchain, record);
		if (!joined)
			return -ENOMEM;
	}
	delivered__set_chain(d, joined ?: sample.callchain);
	free(joined);
	return 0;
}

/* The file offset handed with a sample: the engine must hand it back. */
static u64 sample_offset(u64 time)
{
	return time * 64 + 8;
}

/* Hands @event to the join as the session does: parsed, in its own buffer. */
static int engine__event(struct engine *e, union perf_event *event, u64 file_offset)
{
	struct perf_sample sample;

	if (!event || evsel__parse_sample(e->evsel, event, &sample))
		return -EINVAL;
	return deferred_callchains__event(&e->dc, event, &sample, /*copy=*/NULL,
					  file_offset, engine_path);
}

static int engine__sample(struct engine *e, u32 tid, u64 time, u64 cookie,
			  const struct ips *kernel)
{
	union perf_event buf;

	return engine__event(e, sample__build(&buf, tid, time, cookie, kernel),
			     sample_offset(time));
}

static int engine__record(struct engine *e, u32 tid, u64 time, u64 cookie,
			  const struct ips *stack)
{
	union perf_event buf;

	return engine__event(e, record__build(&buf, PID, tid, time, cookie, stack), 0);
}

static int engine__exit(struct engine *e, u32 tid, u64 time)
{
	union perf_event buf;

	return engine__event(e, exit__build(&buf, tid, time), 0);
}

static int engine__lost(struct engine *e, u64 time, u64 lost)
{
	union perf_event buf;

	return engine__event(e, lost__build(&buf, time, lost), 0);
}

#define ENGINE_OK(call) TEST_ASSERT_VAL(#call, (call) == 0)

static int engine__check(struct engine *e, const struct expect *exp, int nr_exp)
{
	return delivered__check(e->delivered, e->nr, exp, nr_exp);
}

/* What holds for every delivery and, once flushed, for every run. */
static int engine__check_invariants(struct engine *e)
{
	const struct deferred_callchain_stats *stats = &e->dc.stats;

	for (int i = 0; i < e->nr; i++) {
		const struct delivered *d = &e->delivered[i];

		TEST_ASSERT_VAL("file offset handed back",
				d->file_offset == sample_offset(d->time));
		if (d->flags & UNRESOLVED) {
			TEST_ASSERT_VAL("unresolved means no record", !d->has_record);
			TEST_ASSERT_VAL("unresolved is nothing else", d->flags == UNRESOLVED);
		} else {
			TEST_ASSERT_VAL("joined with its record", d->has_record &&
					d->record_cookie == d->cookie);
			TEST_ASSERT_VAL("joined flag", d->flags & JOINED);
		}
	}

	TEST_ASSERT_VAL("flush", deferred_callchains__flush(&e->dc) == 0);
	TEST_ASSERT_VAL("every deferred sample delivered", stats->deferred == (u64)e->nr);
	TEST_ASSERT_VAL("nothing held", list_empty(&e->dc.queue) && !e->dc.queued_bytes &&
			!e->dc.nr_waiting);
	TEST_ASSERT_VAL("in time order", !e->out_of_order);
	TEST_ASSERT_VAL("deferred == joined + unresolved",
			stats->deferred == stats->joined + stats->unresolved);
	TEST_ASSERT_VAL("backward joins are joins", stats->backward <= stats->joined);
	TEST_ASSERT_VAL("ambiguous joins are joins", stats->ambiguous <= stats->joined);
	return TEST_OK;
}

static struct engine *engine__new(void)
{
	struct perf_event_attr attr = {
		.type		= PERF_TYPE_SOFTWARE,
		.config		= PERF_COUNT_SW_CPU_CLOCK,
		.sample_type	= SAMPLE_TYPE,
		.sample_id_all	= 1,
	};
	struct engine *e = zalloc(sizeof(*e));

	if (!e)
		return NULL;
	e->evsel = evsel__new(&attr);
	if (!e->evsel)
		goto out_free;
	if (deferred_callchains__init(&e->dc, engine__deliver, e))
		goto out_delete;
	return e;

out_delete:
	evsel__delete(e->evsel);
out_free:
	free(e);
	return NULL;
}

static void engine__delete(struct engine *e)
{
	if (!e)
		return;
	deferred_callchains__exit(&e->dc);
	evsel__delete(e->evsel);
	free(e);
}

static int engine__run(int (*fn)(struct engine *e))
{
	struct engine *e = engine__new();
	int ret;

	if (!e)
		return TEST_FAIL;
	ret = fn(e);
	if (ret == TEST_OK)
		ret = engine__check_invariants(e);
	engine__delete(e);
	return ret;
}

/* Rule 1: samples wait for the record with their tid and cookie. */
static int forward_join(struct engine *e)
{
	const struct expect exp[] = {
		{ 1, JOINED, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2) },
		{ 2, JOINED, IPS(CTX_K, KIP3, CTX_U, UIP1, UIP2) },
		/* a sample of user mode: the user part is all there is */
		{ 3, JOINED, IPS(CTX_U, UIP3) },
		/* the walk found nothing: the kernel part alone, still joined */
		{ 4, JOINED, IPS(CTX_K, KIP1) },
	};

	ENGINE_OK(engine__sample(e, TID1, 1, COOKIE1, &kernel_a));
	ENGINE_OK(engine__sample(e, TID1, 2, COOKIE1, &kernel_b));
	TEST_ASSERT_VAL("samples wait for their record", e->nr == 0);
	ENGINE_OK(engine__record(e, TID1, 3, COOKIE1, &stack_a));
	TEST_ASSERT_VAL("record delivers both samples", e->nr == 2);

	ENGINE_OK(engine__sample(e, TID2, 3, COOKIE2, &user_mode));
	ENGINE_OK(engine__record(e, TID2, 4, COOKIE2, &stack_b));

	ENGINE_OK(engine__sample(e, TID3, 4, COOKIE3, &kernel_c));
	ENGINE_OK(engine__record(e, TID3, 5, COOKIE3, &stack_empty));

	TEST_ASSERT_VAL("joined", engine__check(e, exp, ARRAY_SIZE(exp)) == TEST_OK);
	TEST_ASSERT_VAL("joined count", e->dc.stats.joined == 4);
	TEST_ASSERT_VAL("not backward", e->dc.stats.backward == 0);
	TEST_ASSERT_VAL("no orphan", e->dc.stats.orphans == 0);
	return TEST_OK;
}

/*
 * Rule 1: nothing comes out before its record, and everything after a
 * waiting sample waits behind it: time order is kept.
 */
static int samples_wait(struct engine *e)
{
	const struct expect exp[] = {
		{ 1, JOINED, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2) },
		{ 2, JOINED, IPS(CTX_K, KIP3, CTX_U, UIP3) },
		{ 3, JOINED, IPS(CTX_K, KIP1, CTX_U, UIP1, UIP2) },
		{ 4, JOINED, IPS(CTX_K, KIP3, CTX_U, UIP1, UIP2) },
		{ 5, JOINED, IPS(CTX_U, UIP1, UIP2) },
	};

	ENGINE_OK(engine__sample(e, TID1, 1, COOKIE1, &kernel_a));
	ENGINE_OK(engine__sample(e, TID2, 2, COOKIE2, &kernel_b));
	ENGINE_OK(engine__sample(e, TID1, 3, COOKIE1, &kernel_c));
	ENGINE_OK(engine__sample(e, TID1, 4, COOKIE1, &kernel_b));
	ENGINE_OK(engine__sample(e, TID1, 5, COOKIE1, &user_mode));
	ENGINE_OK(engine__lost(e, 5, 0));
	TEST_ASSERT_VAL("nothing delivered yet", e->nr == 0 && e->nr_other == 0);

	ENGINE_OK(engine__record(e, TID2, 6, COOKIE2, &stack_b));
	TEST_ASSERT_VAL("joined, but behind the oldest waiting sample",
			e->nr == 0 && e->nr_other == 0 && e->dc.nr_waiting == 4);
	ENGINE_OK(engine__record(e, TID1, 7, COOKIE1, &stack_a));
	TEST_ASSERT_VAL("the loss and both records after the samples",
			e->nr_other == 3 && e->other_times[0] == 5 &&
			e->other_times[1] == 6 && e->other_times[2] == 7);

	/* the loss above makes them ambiguous: check the order on the rest */
	for (int i = 0; i < e->nr; i++) {
		TEST_ASSERT_VAL("ambiguous", e->delivered[i].flags == (JOINED | AMBIGUOUS));
		e->delivered[i].flags &= ~AMBIGUOUS;
	}
	TEST_ASSERT_VAL("order", engine__check(e, exp, ARRAY_SIZE(exp)) == TEST_OK);
	return TEST_OK;
}

/* Rule 2: a sample after its record in the same stay joins at once. */
static int backward_join(struct engine *e)
{
	const struct expect exp[] = {
		{ 1, JOINED | BACKWARD, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2) },
		{ 2, JOINED | BACKWARD, IPS(CTX_U, UIP1, UIP2) },
		{ 3, UNRESOLVED, IPS(CTX_K, KIP3) },
		{ 4, JOINED | BACKWARD, IPS(CTX_K, KIP3, CTX_U, UIP1, UIP2) },
	};

	ENGINE_OK(engine__record(e, TID1, 0, COOKIE1, &stack_a));
	TEST_ASSERT_VAL("a record alone delivers nothing", e->nr == 0);
	ENGINE_OK(engine__sample(e, TID1, 1, COOKIE1, &kernel_a));
	TEST_ASSERT_VAL("delivered at once", e->nr == 1);
	ENGINE_OK(engine__sample(e, TID1, 2, COOKIE1, &user_mode));
	TEST_ASSERT_VAL("delivered at once", e->nr == 2);

	/* another cookie waits, and the record does not serve it */
	ENGINE_OK(engine__sample(e, TID1, 3, COOKIE2, &kernel_b));
	TEST_ASSERT_VAL("other cookie waits", e->nr == 2);
	/* the last record still serves its own cookie, behind the waiting one */
	ENGINE_OK(engine__sample(e, TID1, 4, COOKIE1, &kernel_b));
	TEST_ASSERT_VAL("held behind", e->nr == 2);

	TEST_ASSERT_VAL("backward count", e->dc.stats.backward == 3);
	TEST_ASSERT_VAL("flush", deferred_callchains__flush(&e->dc) == 0);
	TEST_ASSERT_VAL("backward", engine__check(e, exp, ARRAY_SIZE(exp)) == TEST_OK);
	TEST_ASSERT_VAL("a record that served is no orphan", e->dc.stats.orphans == 0);
	return TEST_OK;
}

/* Rule 3: another record, the thread's exit or the end resolve the wait. */
static int unresolved_samples(struct engine *e)
{
	const struct expect exp[] = {
		{ 1, UNRESOLVED, IPS(CTX_K, KIP1, KIP2) },
		{ 3, UNRESOLVED, IPS(CTX_K, KIP3) },
		{ 4, JOINED, IPS(CTX_K, KIP1, CTX_U, UIP3) },
		{ 5, UNRESOLVED, IPS(CTX_K, KIP1) },
		{ 7, UNRESOLVED, { .nr = 0, } },
	};

	ENGINE_OK(engine__sample(e, TID1, 1, COOKIE1, &kernel_a));
	ENGINE_OK(engine__record(e, TID1, 2, COOKIE2, &stack_a));
	TEST_ASSERT_VAL("newer record resolves", e->nr == 1);

	ENGINE_OK(engine__sample(e, TID1, 3, COOKIE3, &kernel_b));
	ENGINE_OK(engine__sample(e, TID1, 4, COOKIE4, &kernel_c));
	ENGINE_OK(engine__record(e, TID1, 5, COOKIE4, &stack_b));
	TEST_ASSERT_VAL("one record resolves and joins", e->nr == 3);

	ENGINE_OK(engine__sample(e, TID2, 5, COOKIE1, &kernel_c));
	ENGINE_OK(engine__exit(e, TID3, 6));
	TEST_ASSERT_VAL("another thread's exit", e->nr == 3);
	ENGINE_OK(engine__exit(e, TID2, 6));
	TEST_ASSERT_VAL("the thread's exit", e->nr == 4);
	ENGINE_OK(engine__exit(e, TID2, 6));
	TEST_ASSERT_VAL("exit twice", e->nr == 4);

	ENGINE_OK(engine__sample(e, TID3, 7, COOKIE5, &user_mode));
	ENGINE_OK(deferred_callchains__flush(&e->dc));
	TEST_ASSERT_VAL("unresolved", engine__check(e, exp, ARRAY_SIZE(exp)) == TEST_OK);
	TEST_ASSERT_VAL("count of unresolved", e->dc.stats.unresolved == 4);
	TEST_ASSERT_VAL("joined count", e->dc.stats.joined == 1);
	return TEST_OK;
}

/* Rule 4: a record no sample used is an orphan once forgotten. */
static int orphan_records(struct engine *e)
{
	const struct deferred_callchain_stats *stats = &e->dc.stats;

	/* replaced by a newer record */
	ENGINE_OK(engine__record(e, TID1, 1, COOKIE1, &stack_a));
	TEST_ASSERT_VAL("kept for rule 2", stats->orphans == 0);
	ENGINE_OK(engine__record(e, TID1, 2, COOKIE2, &stack_b));
	TEST_ASSERT_VAL("replaced", stats->orphans == 1);
	/* this one serves a backward join: no orphan on exit */
	ENGINE_OK(engine__sample(e, TID1, 3, COOKIE2, &kernel_a));
	ENGINE_OK(engine__exit(e, TID1, 3));
	TEST_ASSERT_VAL("served backward", stats->orphans == 1);

	/* forgotten on exit */
	ENGINE_OK(engine__record(e, TID2, 4, COOKIE3, &stack_a));
	ENGINE_OK(engine__exit(e, TID2, 4));
	TEST_ASSERT_VAL("exit", stats->orphans == 2);

	/* served forward, then replaced: no orphan */
	ENGINE_OK(engine__sample(e, TID3, 5, COOKIE4, &kernel_b));
	ENGINE_OK(engine__record(e, TID3, 6, COOKIE4, &stack_a));
	ENGINE_OK(engine__record(e, TID3, 7, COOKIE5, &stack_b));
	TEST_ASSERT_VAL("served forward", stats->orphans == 2);

	/* forgotten at the end: TID3's COOKIE5 and TID4's COOKIE1 */
	ENGINE_OK(engine__record(e, TID4, 8, COOKIE1, &stack_empty));
	ENGINE_OK(deferred_callchains__flush(&e->dc));
	TEST_ASSERT_VAL("flush", stats->orphans == 4);
	TEST_ASSERT_VAL("records", stats->records == 6);
	/* records == records that served + orphans */
	TEST_ASSERT_VAL("records add up", stats->records == 2 + stats->orphans);
	return TEST_OK;
}

/* Rule 5: a loss between a sample and its record makes the join ambiguous. */
static int ambiguous_joins(struct engine *e)
{
	const struct deferred_callchain_stats *stats = &e->dc.stats;
	const struct expect exp[] = {
		{ 1, JOINED | AMBIGUOUS, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2) },
		{ 2, JOINED | BACKWARD | AMBIGUOUS, IPS(CTX_K, KIP3, CTX_U, UIP3) },
		{ 3, JOINED, IPS(CTX_K, KIP1, CTX_U, UIP1, UIP2) },
		{ 4, JOINED | BACKWARD, IPS(CTX_U, UIP3) },
		{ 5, UNRESOLVED, IPS(CTX_K, KIP3) },
	};

	/* lost between the sample and the record */
	ENGINE_OK(engine__sample(e, TID1, 1, COOKIE1, &kernel_a));
	ENGINE_OK(engine__lost(e, 1, 5));
	ENGINE_OK(engine__record(e, TID1, 2, COOKIE1, &stack_a));

	/* lost between the record and the backward sample */
	ENGINE_OK(engine__record(e, TID2, 2, COOKIE2, &stack_b));
	ENGINE_OK(engine__lost(e, 2, 3));
	ENGINE_OK(engine__sample(e, TID2, 2, COOKIE2, &kernel_b));

	/* lost before both */
	ENGINE_OK(engine__lost(e, 3, 1));
	ENGINE_OK(engine__sample(e, TID3, 3, COOKIE3, &kernel_c));
	ENGINE_OK(engine__record(e, TID3, 3, COOKIE3, &stack_a));
	ENGINE_OK(engine__lost(e, 4, 0));
	ENGINE_OK(engine__record(e, TID4, 4, COOKIE4, &stack_b));
	ENGINE_OK(engine__sample(e, TID4, 4, COOKIE4, &user_mode));

	/* an unresolved sample is not a join, ambiguous or not */
	ENGINE_OK(engine__sample(e, TID1, 5, COOKIE5, &kernel_b));
	ENGINE_OK(engine__lost(e, 5, 2));
	ENGINE_OK(engine__record(e, TID1, 6, COOKIE3, &stack_b));

	TEST_ASSERT_VAL("ambiguous", engine__check(e, exp, ARRAY_SIZE(exp)) == TEST_OK);
	TEST_ASSERT_VAL("count of ambiguous", stats->ambiguous == 2);
	TEST_ASSERT_VAL("lost count", stats->lost == 5 + 3 + 1 + 0 + 2);
	return TEST_OK;
}

/* The key is (tid, cookie): the same cookie on two threads does not cross. */
static int threads(struct engine *e)
{
	const struct expect exp[] = {
		{ 1, JOINED, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2) },
		{ 2, JOINED, IPS(CTX_K, KIP3, CTX_U, UIP3) },
		{ 4, UNRESOLVED, IPS(CTX_K, KIP1) },
		{ 5, UNRESOLVED, IPS(CTX_K, KIP1) },
	};

	ENGINE_OK(engine__sample(e, TID1, 1, COOKIE1, &kernel_a));
	ENGINE_OK(engine__sample(e, TID2, 2, COOKIE1, &kernel_b));
	ENGINE_OK(engine__record(e, TID2, 3, COOKIE1, &stack_b));
	TEST_ASSERT_VAL("TID2 joined, TID1 waits", e->nr == 0 && e->dc.nr_waiting == 1);
	ENGINE_OK(engine__record(e, TID1, 4, COOKIE1, &stack_a));
	TEST_ASSERT_VAL("TID1, then TID2", e->nr == 2 && e->delivered[0].tid == TID1 &&
			e->delivered[1].tid == TID2);

	/* no backward join with another thread's record */
	ENGINE_OK(engine__sample(e, TID3, 4, COOKIE1, &kernel_c));
	TEST_ASSERT_VAL("TID3 waits", e->nr == 2);
	/* nor resolution by another thread's record or exit */
	ENGINE_OK(engine__sample(e, TID4, 5, COOKIE2, &kernel_c));
	ENGINE_OK(engine__record(e, TID1, 5, COOKIE3, &stack_b));
	ENGINE_OK(engine__exit(e, TID2, 5));
	TEST_ASSERT_VAL("still waiting", e->nr == 2 && e->dc.nr_waiting == 2);
	ENGINE_OK(engine__exit(e, TID4, 5));
	TEST_ASSERT_VAL("TID4 resolved, behind TID3", e->nr == 2 && e->dc.nr_waiting == 1);
	ENGINE_OK(deferred_callchains__flush(&e->dc));
	TEST_ASSERT_VAL("threads", engine__check(e, exp, ARRAY_SIZE(exp)) == TEST_OK);
	return TEST_OK;
}

/* The counts of a mixed run. */
static int stats(struct engine *e)
{
	const struct deferred_callchain_stats *stats = &e->dc.stats;

	ENGINE_OK(engine__sample(e, TID1, 1, COOKIE1, &kernel_a));	/* joined */
	ENGINE_OK(engine__sample(e, TID1, 2, COOKIE1, &kernel_b));	/* joined */
	ENGINE_OK(engine__sample(e, TID2, 3, COOKIE2, &kernel_a));	/* unresolved */
	ENGINE_OK(engine__lost(e, 3, 7));
	ENGINE_OK(engine__record(e, TID1, 4, COOKIE1, &stack_a));	/* served */
	ENGINE_OK(engine__sample(e, TID1, 5, COOKIE1, &kernel_c));	/* backward */
	ENGINE_OK(engine__record(e, TID2, 6, COOKIE3, &stack_b));	/* orphan */
	ENGINE_OK(engine__record(e, TID3, 7, COOKIE4, &stack_b));	/* orphan */
	ENGINE_OK(engine__lost(e, 7, 4));
	ENGINE_OK(engine__sample(e, TID3, 8, COOKIE4, &user_mode));	/* backward */
	ENGINE_OK(engine__sample(e, TID4, 9, COOKIE5, &kernel_c));	/* unresolved */
	ENGINE_OK(deferred_callchains__flush(&e->dc));

	TEST_ASSERT_VAL("deferred", stats->deferred == 6);
	TEST_ASSERT_VAL("joined", stats->joined == 4);
	TEST_ASSERT_VAL("backward", stats->backward == 2);
	/* samples 1 and 2 across the first loss, sample 8 across the second */
	TEST_ASSERT_VAL("ambiguous", stats->ambiguous == 3);
	TEST_ASSERT_VAL("unresolved", stats->unresolved == 2);
	TEST_ASSERT_VAL("deferred == joined + unresolved",
			stats->deferred == stats->joined + stats->unresolved);
	TEST_ASSERT_VAL("records", stats->records == 3);
	TEST_ASSERT_VAL("orphans", stats->orphans == 1);
	/* TID1's and TID3's records served, TID2's did not */
	TEST_ASSERT_VAL("records == served + orphans", stats->records == 2 + stats->orphans);
	TEST_ASSERT_VAL("lost", stats->lost == 11);
	TEST_ASSERT_VAL("malformed", stats->malformed == 0);
	TEST_ASSERT_VAL("delivered", e->nr == 6);
	return TEST_OK;
}

/* The engine keeps copies: the caller reuses its buffers at once. */
static int copies(struct engine *e)
{
	const struct expect exp[] = {
		{ 1, JOINED, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2) },
		{ 3, JOINED | BACKWARD, IPS(CTX_K, KIP3, CTX_U, UIP1, UIP2) },
	};
	union perf_event sample_buf, record_buf;
	struct perf_sample sample;
	union perf_event *event;

	event = sample__build(&sample_buf, TID1, 1, COOKIE1, &kernel_a);
	TEST_ASSERT_VAL("sample", event);
	TEST_ASSERT_VAL("parse", !evsel__parse_sample(e->evsel, event, &sample));
	ENGINE_OK(deferred_callchains__event(&e->dc, event, &sample, /*copy=*/NULL,
					     sample_offset(1), engine_path));
	/* what a reader does with its buffer: the next event goes there */
	memset(&sample_buf, 0xff, sizeof(sample_buf));
	TEST_ASSERT_VAL("sample", sample__build(&sample_buf, TID2, 2, COOKIE2, &kernel_b));

	event = record__build(&record_buf, PID, TID1, 2, COOKIE1, &stack_a);
	TEST_ASSERT_VAL("record", event);
	ENGINE_OK(engine__event(e, event, 0));
	TEST_ASSERT_VAL("delivered", e->nr == 1);
	TEST_ASSERT_VAL("a copy was delivered", e->delivered[0].event != (void *)&sample_buf);
	/* the record is kept for rule 2: a copy too */
	memset(&record_buf, 0xff, sizeof(record_buf));
	TEST_ASSERT_VAL("record", record__build(&record_buf, PID, TID1, 2, COOKIE1, &stack_b));

	ENGINE_OK(engine__sample(e, TID1, 3, COOKIE1, &kernel_b));
	TEST_ASSERT_VAL("copies", engine__check(e, exp, ARRAY_SIZE(exp)) == TEST_OK);
	TEST_ASSERT_VAL("sample fields", e->delivered[0].pid == PID &&
			e->delivered[0].tid == TID1 && e->delivered[0].cookie == COOKIE1);
	return TEST_OK;
}

/*
 * Memory: a held event costs its bytes and at most 128 more; past the
 * queue's cap the oldest waiting sample is given up on (unresolved, counted)
 * and what it held back goes out, in order.
 */
static int queue_cap(struct engine *e)
{
	const struct expect exp[] = {
		{ 1, UNRESOLVED, IPS(CTX_K, KIP1, KIP2) },
		{ 2, JOINED, IPS(CTX_K, KIP3, CTX_U, UIP3) },
	};
	const struct deferred_callchain_stats *stats = &e->dc.stats;
	union perf_event buf;
	u16 size = sample__build(&buf, TID1, 1, COOKIE1, &kernel_a)->header.size;

	ENGINE_OK(engine__sample(e, TID1, 1, COOKIE1, &kernel_a));
	TEST_ASSERT_VAL("a held sample costs its bytes plus at most 128",
			e->dc.queued_bytes >= size && e->dc.queued_bytes <= size + 128u);
	/* room for that sample alone */
	e->dc.max_queued_bytes = e->dc.queued_bytes;
	ENGINE_OK(engine__sample(e, TID2, 2, COOKIE2, &kernel_b));
	TEST_ASSERT_VAL("the oldest given up on", e->nr == 1 && stats->capped == 1 &&
			e->dc.nr_waiting == 1);
	ENGINE_OK(engine__record(e, TID2, 3, COOKIE2, &stack_b));
	/* its record comes too late: an orphan */
	ENGINE_OK(engine__record(e, TID1, 4, COOKIE1, &stack_a));
	ENGINE_OK(deferred_callchains__flush(&e->dc));
	TEST_ASSERT_VAL("cap", engine__check(e, exp, ARRAY_SIZE(exp)) == TEST_OK);
	TEST_ASSERT_VAL("unresolved", stats->unresolved == 1 && stats->orphans == 1);
	return TEST_OK;
}

/* Without sample_id_all records have no tid: samples go out at once, unresolved. */
static int records_without_tid(struct engine *e)
{
	const struct expect exp[] = {
		{ 1, UNRESOLVED, IPS(CTX_K, KIP1, KIP2) },
	};

	e->dc.records_have_no_tid = true;
	ENGINE_OK(engine__sample(e, TID1, 1, COOKIE1, &kernel_a));
	TEST_ASSERT_VAL("at once", engine__check(e, exp, ARRAY_SIZE(exp)) == TEST_OK);
	TEST_ASSERT_VAL("nothing held", list_empty(&e->dc.queue));
	return TEST_OK;
}

/*
 * A file's index: the records known before any event is read, each sample
 * is joined (forward, backward, ambiguous across a loss's time) or
 * unresolved the moment it comes, and nothing is held.
 */
static int indexed_file(struct engine *e)
{
	const struct expect exp[] = {
		{ 10, JOINED, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2) },
		{ 20, JOINED | AMBIGUOUS, IPS(CTX_K, KIP3, CTX_U, UIP3) },
		{ 35, JOINED | BACKWARD, IPS(CTX_K, KIP1, CTX_U, UIP1, UIP2) },
		{ 60, UNRESOLVED, IPS(CTX_K, KIP1) },
		/* another thread's cookie */
		{ 70, UNRESOLVED, IPS(CTX_K, KIP3) },
	};
	const struct deferred_callchain_stats *stats = &e->dc.stats;
	static const struct {
		u32			tid;
		u64			time, cookie;
		const struct ips	*stack;
	} indexed[] = {
		{ TID1, 30, COOKIE1, &stack_a },
		{ TID2, 50, COOKIE2, &stack_b },
		/* never used: an orphan */
		{ TID4, 80, COOKIE4, &stack_b },
	};
	union perf_event records[ARRAY_SIZE(indexed)];

	for (size_t i = 0; i < ARRAY_SIZE(indexed); i++) {
		union perf_event *record = record__build(&records[i], PID, indexed[i].tid,
							 indexed[i].time, indexed[i].cookie,
							 indexed[i].stack);

		TEST_ASSERT_VAL("record", record);
		ENGINE_OK(deferred_callchains__index_record(&e->dc, record, indexed[i].tid,
							    indexed[i].time, indexed[i].time));
	}
	ENGINE_OK(deferred_callchains__index_lost(&e->dc, 40));
	ENGINE_OK(deferred_callchains__index_done(&e->dc));

	ENGINE_OK(engine__sample(e, TID1, 10, COOKIE1, &kernel_a));
	TEST_ASSERT_VAL("joined at once", e->nr == 1);
	ENGINE_OK(engine__sample(e, TID2, 20, COOKIE2, &kernel_b));
	TEST_ASSERT_VAL("joined at once", e->nr == 2);
	ENGINE_OK(engine__record(e, TID1, 30, COOKIE1, &stack_a));
	ENGINE_OK(engine__sample(e, TID1, 35, COOKIE1, &kernel_c));
	ENGINE_OK(engine__lost(e, 40, 2));
	ENGINE_OK(engine__record(e, TID2, 50, COOKIE2, &stack_b));
	ENGINE_OK(engine__sample(e, TID3, 60, COOKIE3, &kernel_c));
	TEST_ASSERT_VAL("unresolved at once", e->nr == 4);
	ENGINE_OK(engine__sample(e, TID1, 70, COOKIE2, &kernel_b));
	ENGINE_OK(engine__record(e, TID4, 80, COOKIE4, &stack_b));
	TEST_ASSERT_VAL("nothing held", list_empty(&e->dc.queue) && !e->dc.nr_waiting);
	TEST_ASSERT_VAL("records and a loss handed on", e->nr_other == 4);
	ENGINE_OK(deferred_callchains__flush(&e->dc));

	TEST_ASSERT_VAL("indexed", engine__check(e, exp, ARRAY_SIZE(exp)) == TEST_OK);
	TEST_ASSERT_VAL("joined", stats->joined == 3 && stats->backward == 1 &&
			stats->ambiguous == 1 && stats->unresolved == 2);
	TEST_ASSERT_VAL("records", stats->records == 3 && stats->orphans == 1);
	TEST_ASSERT_VAL("lost", stats->lost == 2);
	return TEST_OK;
}

/*
 * The index's keys: a thread's records are found by tid and told apart by
 * the whole 64-bit cookie, whatever the width of the hashmap's long keys.
 * Cookies that differ only in their high half are other stays; one cookie
 * in the records of many tids (a crafted file, or wrapped counters) costs
 * a lookup each, not a walk of the others: the hashes and key comparisons
 * stay linear.
 */
#define INDEX_TIDS	4096
#define INDEX_TID0	10000

struct index_keys {
	struct evsel	*evsel;
	u64		joined_right;
	u64		joined_wrong;
};

static int index_keys__deliver(struct deferred_callchains *dc, union perf_event *event,
			       struct perf_sample *sample, const union perf_event *record,
			       unsigned int flags __maybe_unused, u64 file_offset __maybe_unused,
			       const char *file_path __maybe_unused)
{
	struct index_keys *ik = dc->priv;
	u64 expected;

	if (event->header.type != PERF_RECORD_SAMPLE || !sample)
		return 0;
	if (!record)
		return -EINVAL;
	/* each record's stack is an address made of its tid and cookie */
	expected = UIP0 + sample->tid + (sample->deferred_cookie >> 32);
	if (record->callchain_deferred.nr == 1 && record->callchain_deferred.ips[0] == expected)
		ik->joined_right++;
	else
		ik->joined_wrong++;
	return 0;
}

static int index_keys__sample(struct deferred_callchains *dc, struct index_keys *ik,
			      u32 tid, u64 time, u64 cookie)
{
	union perf_event buf, *event = sample__build(&buf, tid, time, cookie, &kernel_a);
	struct perf_sample sample;

	if (!event || evsel__parse_sample(ik->evsel, event, &sample))
		return -EINVAL;
	return deferred_callchains__event(dc, event, &sample, /*copy=*/NULL, time, engine_path);
}

static int test__index_keys(struct test_suite *test __maybe_unused,
			    int subtest __maybe_unused)
{
	struct perf_event_attr attr = {
		.type		= PERF_TYPE_SOFTWARE,
		.config		= PERF_COUNT_SW_CPU_CLOCK,
		.sample_type	= SAMPLE_TYPE,
		.sample_id_all	= 1,
	};
	/* same low half, other high halves: a long of 32 bits keeps the low */
	static const u64 cookies[] = { COOKIE1, COOKIE1 + (1ULL << 32), COOKIE1 + (2ULL << 32) };
	const size_t nr_records = INDEX_TIDS + ARRAY_SIZE(cookies);
	struct index_keys ik = { .evsel = evsel__new(&attr), };
	struct deferred_callchains dc;
	union perf_event *records = calloc(nr_records, sizeof(*records));
	size_t nr = 0;
	u64 lookups;
	int ret = TEST_FAIL;

	if (!ik.evsel || !records || deferred_callchains__init(&dc, index_keys__deliver, &ik))
		goto out_free;

	for (size_t i = 0; i < ARRAY_SIZE(cookies); i++, nr++) {
		const struct ips stack = { 1, (const u64[]){ UIP0 + TID1 + (cookies[i] >> 32) } };

		/* one stay after another: each sample comes before its record */
		if (!record__build(&records[nr], PID, TID1, 10 + 10 * i, cookies[i], &stack) ||
		    deferred_callchains__index_record(&dc, &records[nr], TID1, 10 + 10 * i, nr))
			goto out_exit;
	}
	for (u32 tid = INDEX_TID0; tid < INDEX_TID0 + INDEX_TIDS; tid++, nr++) {
		const struct ips stack = { 1, (const u64[]){ UIP0 + tid + (COOKIE3 >> 32) } };

		if (!record__build(&records[nr], PID, tid, 20, COOKIE3, &stack) ||
		    deferred_callchains__index_record(&dc, &records[nr], tid, 20, nr))
			goto out_exit;
	}
	if (deferred_callchains__index_done(&dc))
		goto out_exit;

	/* in time order, as the reader delivers them */
	for (size_t i = 0; i < ARRAY_SIZE(cookies); i++) {
		if (index_keys__sample(&dc, &ik, TID1, 5 + 10 * i, cookies[i]))
			goto out_exit;
	}
	for (u32 tid = INDEX_TID0 + INDEX_TIDS; tid-- > INDEX_TID0; ) {
		if (index_keys__sample(&dc, &ik, tid, 30, COOKIE3))
			goto out_exit;
	}
	if (deferred_callchains__flush(&dc))
		goto out_exit;

	lookups = 2 * nr_records;	/* one to add each record, one per sample */
	pr_debug("%" PRIu64 " joined right, %" PRIu64 " wrong; %" PRIu64 " hashes and %"
		 PRIu64 " key comparisons for %" PRIu64 " lookups\n", ik.joined_right,
		 ik.joined_wrong, dc.index_hashes, dc.index_compares, lookups);
	if (ik.joined_right != nr_records || ik.joined_wrong ||
	    dc.stats.joined != nr_records || dc.stats.orphans)
		goto out_exit;
	/* a bucket of every tid's record would take millions */
	if (dc.index_compares > 4 * lookups || dc.index_hashes > 4 * lookups)
		goto out_exit;
	ret = TEST_OK;
out_exit:
	deferred_callchains__exit(&dc);
out_free:
	free(records);
	evsel__delete(ik.evsel);
	return ret;
}

/* How the queue and the index must both see it */
static const struct expect rules_expected[] = {
	{ 1, JOINED, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2) },
	{ 4, JOINED | BACKWARD, IPS(CTX_K, KIP3, CTX_U, UIP3) },
	{ 5, UNRESOLVED, IPS(CTX_K, KIP1, KIP2) },
	{ 8, UNRESOLVED, IPS(CTX_K, KIP1, KIP2) },
	{ 13, JOINED | BACKWARD, IPS(CTX_K, KIP1, CTX_U, UIP3) },
	{ 14, JOINED | AMBIGUOUS, IPS(CTX_K, KIP1, KIP2) },
	/* the overtaken record is the thread's last, across the loss */
	{ 17, JOINED | BACKWARD | AMBIGUOUS, IPS(CTX_K, KIP3, CTX_U, UIP1, UIP2) },
};

static int engine__scripted(struct engine *e, const struct scripted *ev)
{
	switch (ev->kind) {
	case SCRIPTED_SAMPLE:
		return engine__sample(e, ev->tid, ev->time, ev->cookie, ev->ips);
	case SCRIPTED_RECORD:
		return engine__record(e, ev->tid, ev->time, ev->cookie, ev->ips);
	case SCRIPTED_EXIT:
		return engine__exit(e, ev->tid, ev->time);
	case SCRIPTED_LOST:
		return engine__lost(e, ev->time, 1);
	default:
		return -EINVAL;
	}
}

/* What a file's index has of the stream; @records keeps its records. */
static int engine__index_scripted(struct engine *e, union perf_event *records)
{
	for (size_t i = 0; i < rules_stream_nr; i++) {
		const struct scripted *ev = &rules_stream[i];
		u64 offset = sample_offset(ev->time);
		int err = 0;

		switch (ev->kind) {
		case SCRIPTED_RECORD:
			if (!record__build(&records[i], PID, ev->tid, ev->time, ev->cookie,
					   ev->ips))
				return -EINVAL;
			err = deferred_callchains__index_record(&e->dc, &records[i], ev->tid,
								ev->time, offset);
			break;
		case SCRIPTED_EXIT:
			err = deferred_callchains__index_exit(&e->dc, ev->tid, ev->time, offset);
			break;
		case SCRIPTED_LOST:
			err = deferred_callchains__index_lost(&e->dc, ev->time);
			break;
		case SCRIPTED_SAMPLE:
		default:
			break;
		}
		if (err)
			return err;
	}
	return deferred_callchains__index_done(&e->dc);
}

static int test__one_answer(struct test_suite *test __maybe_unused,
			    int subtest __maybe_unused)
{
	union perf_event *records = calloc(rules_stream_nr, sizeof(*records));
	struct engine *queue = engine__new(), *index = engine__new();
	int ret = TEST_FAIL;

	if (!records || !queue || !index ||
	    engine__index_scripted(index, records))
		goto out;
	for (size_t i = 0; i < rules_stream_nr; i++) {
		if (engine__scripted(queue, &rules_stream[i]) ||
		    engine__scripted(index, &rules_stream[i]))
			goto out;
	}
	if (engine__check_invariants(queue) != TEST_OK ||
	    engine__check_invariants(index) != TEST_OK)
		goto out;
	pr_debug("the queue:\n");
	if (engine__check(queue, rules_expected, ARRAY_SIZE(rules_expected)) != TEST_OK)
		goto out;
	pr_debug("the index:\n");
	if (engine__check(index, rules_expected, ARRAY_SIZE(rules_expected)) != TEST_OK)
		goto out;
	if (memcmp(&queue->dc.stats, &index->dc.stats, sizeof(queue->dc.stats))) {
		pr_debug("the counts differ:\n");
		deferred_callchain_stats__fprintf(&queue->dc.stats, stderr, "queue: ");
		deferred_callchain_stats__fprintf(&index->dc.stats, stderr, "index: ");
		goto out;
	}
	/* after the exit, the overtaken one, the unsampled thread's */
	if (queue->dc.stats.records != 8 || queue->dc.stats.orphans != 3)
		goto out;
	ret = TEST_OK;
out:
	engine__delete(queue);
	engine__delete(index);
	free(records);
	return ret;
}

/*
 * Starts a pipe stream: the pipe header, then the attrs of events of these
 * @ids, as this kernel writes them or, @mainline, as Linux 6.19 does.
 */
static int stream__open_as(struct stream *s, bool swap, bool mainline, u64 sample_type,
			   u64 read_format, const u64 *ids, int nr_ids)
{
	struct perf_pipe_file_header header = {
		.magic	= PERF_MAGIC2,
		.size	= sizeof(header),
	};

	s->fd = scratch_file();
	if (s->fd < 0)
		return s->fd;
	s->swap = swap;
	s->mainline = mainline;
	s->no_sample_id = false;
	s->failed = false;
	s->sample_type = sample_type;
	if (mainline)
		s->sample_type &= ~PERF_SAMPLE_CALLCHAIN_DEFERRED;

	if (swap) {
		header.magic = bswap_64(header.magic);
		header.size = bswap_64(header.size);
	}
	stream__write(s, &header, sizeof(header));

	for (int i = 0; i < nr_ids; i++)
		stream__attr(s, read_format, ids[i]);
	return s->failed ? -EIO : 0;
}

static int stream__open_events(struct stream *s, bool swap, u64 sample_type,
			       u64 read_format, const u64 *ids, int nr_ids)
{
	return stream__open_as(s, swap, /*mainline=*/false, sample_type, read_format,
			       ids, nr_ids);
}

/* Starts a pipe stream: the pipe header, then the attr of its one event. */
static int stream__open_type(struct stream *s, bool swap, u64 sample_type)
{
	static const u64 id = 1;

	return stream__open_events(s, swap, sample_type, /*read_format=*/0, &id, 1);
}

static int stream__open(struct stream *s, bool swap)
{
	return stream__open_type(s, swap, SAMPLE_TYPE);
}

/* Returns the fd to read the stream from, or -1. */
static int stream__close(struct stream *s)
{
	if (s->failed || lseek(s->fd, 0, SEEK_SET)) {
		close(s->fd);
		return -1;
	}
	return s->fd;
}

/*
 * The stream the session tests share, in time order, with what the kernel
 * did in the comments. The sample without a cookie had nothing deferred:
 * its fp chain must pass untouched.
 */
static const struct ips kernel_and_user = IPS(CTX_K, KIP2, CTX_U, UIP3);

static int stream__basic(struct stream *s)
{
	stream__sample(s, TID1, 100, COOKIE1, &kernel_a);	/* syscall of TID1 */
	stream__sample(s, TID2, 105, 0, &kernel_and_user);	/* not deferred */
	stream__sample(s, TID2, 110, COOKIE2, &kernel_c);	/* never gets its record */
	stream__sample(s, TID1, 120, COOKIE1, &kernel_b);	/* same stay */
	stream__record(s, TID1, 130, COOKIE1, &stack_a);	/* TID1 returns to user */
	stream__sample(s, TID1, 140, COOKIE1, &kernel_c);	/* after the walk */
	stream__sample(s, TID3, 150, COOKIE3, &user_mode);	/* TID3 in user mode */
	stream__record(s, TID3, 160, COOKIE3, &stack_b);
	stream__sample(s, TID1, 170, COOKIE4, &kernel_c);	/* TID1 exits, and... */
	stream__exit(s, TID1, 180);				/* ...no record came */
	stream__sample(s, TID4, 190, COOKIE5, &kernel_b);
	stream__lost(s, 195, 3);
	stream__record(s, TID4, 197, COOKIE5, &stack_b);
	return s->failed ? -EIO : 0;
}

struct session_test {
	struct perf_tool		tool;
	struct perf_session		*session;
	int				nr_samples;
	struct delivered		samples[MAX_DELIVERED];
	int				nr_records;
	int				nr_records_out_of_bounds;
	u64				record_cookies[MAX_DELIVERED];
	u32				record_tids[MAX_DELIVERED];
	int				nr_exits;
	struct deferred_callchain_stats	stats;
};

static int session_test__sample(const struct perf_tool *tool,
				union perf_event *event __maybe_unused,
				struct perf_sample *sample,
				struct evsel *evsel,
				struct machine *machine __maybe_unused)
{
	struct session_test *st = container_of(tool, struct session_test, tool);
	struct delivered *d;

	if (st->nr_samples == MAX_DELIVERED)
		return -EINVAL;

	d = &st->samples[st->nr_samples++];
	d->time = sample->time;
	d->pid = sample->pid;
	d->tid = sample->tid;
	d->cookie = sample->deferred_cookie;
	d->flags = sample->deferred_flags;
	delivered__set_chain(d, sample->callchain);
	d->raw_size = sample->raw_size;
	if (sample->raw_data)
		memcpy(d->raw, sample->raw_data, min_t(u32, sample->raw_size, MAX_RAW));
	d->period = sample->period;
	d->id = sample->id;
	d->evsel_idx = evsel->core.idx;
	return 0;
}

static int session_test__callchain_deferred(const struct perf_tool *tool,
					    union perf_event *event,
					    struct perf_sample *sample,
					    struct machine *machine __maybe_unused)
{
	struct session_test *st = container_of(tool, struct session_test, tool);
	const struct perf_record_callchain_deferred *rec = &event->callchain_deferred;
	size_t min_size = sizeof(*rec) + sizeof(struct test_sample_id);

	/* whoever gets a record reads its ips: they must be inside it */
	if (event->header.size < min_size ||
	    rec->nr > (event->header.size - min_size) / sizeof(u64))
		st->nr_records_out_of_bounds++;

	if (st->nr_records == MAX_DELIVERED)
		return -EINVAL;
	st->record_cookies[st->nr_records] = rec->cookie;
	st->record_tids[st->nr_records] = sample->tid;
	st->nr_records++;
	return 0;
}

static int session_test__exit(const struct perf_tool *tool,
			      union perf_event *event __maybe_unused,
			      struct perf_sample *sample __maybe_unused,
			      struct machine *machine __maybe_unused)
{
	struct session_test *st = container_of(tool, struct session_test, tool);

	st->nr_exits++;
	return 0;
}

static void session_test__init(struct session_test *st, bool merge)
{
	memset(st, 0, sizeof(*st));
	perf_tool__init(&st->tool, /*ordered_events=*/true);
	/* the session itself tells a byte-swapped pipe's evsels to swap */
	st->tool.attr = perf_event__process_attr;
	st->tool.sample = session_test__sample;
	st->tool.callchain_deferred = session_test__callchain_deferred;
	st->tool.exit = session_test__exit;
	st->tool.merge_deferred_callchains = merge;
	st->tool.no_warn = true;
}

/* Reads the pipe stream in @fd, which it closes. */
static int session_test__read(struct session_test *st, int fd)
{
	struct perf_data data = {
		.path	= "-",
		.mode	= PERF_DATA_MODE_READ,
		.file	= { .fd = fd, },
	};
	int err;

	if (fd < 0)
		return -EINVAL;

	st->session = perf_session__new(&data, &st->tool);
	if (IS_ERR(st->session)) {
		err = PTR_ERR(st->session);
		st->session = NULL;
		pr_debug("perf_session__new: %d\n", err);
		return err;
	}
	if (!perf_data__is_pipe(&data)) {
		pr_debug("not read as a pipe\n");
		err = -EINVAL;
	} else {
		err = perf_session__process_events(st->session);
		st->stats = st->session->deferred_callchains.stats;
	}
	perf_session__delete(st->session);
	st->session = NULL;
	return err;
}

/* What the session makes of stream__basic() with the join on. */
static int session_test__check_basic(struct session_test *st)
{
	/* every sample in time order, whenever its record came */
	const struct expect exp[] = {
		/* rule 1, when TID1's record comes */
		{ 100, JOINED, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2) },
		/* nothing deferred: the chain as it came */
		{ 105, 0, IPS(CTX_K, KIP2, CTX_U, UIP3) },
		/* rule 3: end of data */
		{ 110, UNRESOLVED, IPS(CTX_K, KIP1) },
		{ 120, JOINED, IPS(CTX_K, KIP3, CTX_U, UIP1, UIP2) },
		/* rule 2 */
		{ 140, JOINED | BACKWARD, IPS(CTX_K, KIP1, CTX_U, UIP1, UIP2) },
		{ 150, JOINED, IPS(CTX_U, UIP3) },
		/* rule 3: EXIT */
		{ 170, UNRESOLVED, IPS(CTX_K, KIP1) },
		/* rule 5 */
		{ 190, JOINED | AMBIGUOUS, IPS(CTX_K, KIP3, CTX_U, UIP3) },
	};
	static const u32 tids[] = { TID1, TID2, TID2, TID1, TID1, TID3, TID1, TID4 };
	static const u64 cookies[] = {
		COOKIE1, 0, COOKIE2, COOKIE1, COOKIE1, COOKIE3, COOKIE4, COOKIE5,
	};
	static const u64 record_cookies[] = { COOKIE1, COOKIE3, COOKIE5 };
	static const u32 record_tids[] = { TID1, TID3, TID4 };
	const struct deferred_callchain_stats *stats = &st->stats;

	TEST_ASSERT_VAL("samples", delivered__check(st->samples, st->nr_samples,
						    exp, ARRAY_SIZE(exp)) == TEST_OK);
	for (size_t i = 0; i < ARRAY_SIZE(exp); i++) {
		const struct delivered *d = &st->samples[i];

		TEST_ASSERT_VAL("pid", d->pid == PID);
		TEST_ASSERT_VAL("tid", d->tid == tids[i]);
		TEST_ASSERT_VAL("cookie", d->cookie == cookies[i]);
	}

	/* records still reach the tool, for perf inject */
	TEST_ASSERT_VAL("records", st->nr_records == 3);
	for (size_t i = 0; i < ARRAY_SIZE(record_cookies); i++) {
		TEST_ASSERT_VAL("record cookie", st->record_cookies[i] == record_cookies[i]);
		TEST_ASSERT_VAL("record tid", st->record_tids[i] == record_tids[i]);
	}
	TEST_ASSERT_VAL("exit", st->nr_exits == 1);

	TEST_ASSERT_VAL("deferred", stats->deferred == 7);
	TEST_ASSERT_VAL("joined", stats->joined == 5);
	TEST_ASSERT_VAL("backward", stats->backward == 1);
	TEST_ASSERT_VAL("ambiguous", stats->ambiguous == 1);
	TEST_ASSERT_VAL("unresolved", stats->unresolved == 2);
	TEST_ASSERT_VAL("stat records", stats->records == 3);
	TEST_ASSERT_VAL("orphans", stats->orphans == 0);
	TEST_ASSERT_VAL("malformed", stats->malformed == 0);
	TEST_ASSERT_VAL("lost", stats->lost == 3);
	return TEST_OK;
}

static int session_test__basic(bool swap, bool mainline)
{
	static const u64 id = 1;
	struct session_test *st = zalloc(sizeof(*st));
	struct stream s;
	int ret = TEST_FAIL;

	if (!st)
		return TEST_FAIL;
	session_test__init(st, /*merge=*/true);
	if (stream__open_as(&s, swap, mainline, SAMPLE_TYPE, /*read_format=*/0, &id, 1) ||
	    stream__basic(&s)) {
		close(s.fd);
		goto out;
	}
	if (session_test__read(st, stream__close(&s)))
		goto out;
	ret = session_test__check_basic(st);
out:
	free(st);
	return ret;
}

/* A session case of its own: @body reads its stream through a fresh session. */
static int session_test__run(bool merge, int (*body)(struct session_test *st))
{
	struct session_test *st = zalloc(sizeof(*st));
	int ret;

	if (!st)
		return TEST_FAIL;
	session_test__init(st, merge);
	ret = body(st);
	free(st);
	return ret;
}

/*
 * Rules 1, 2, 3 (EXIT and end of data) and 5 through a pipe session: the
 * stream in either byte order, and as Linux 6.19 writes it
 * (attr.defer_callchain, the cookie at the end of the callchain,
 * PERF_CONTEXT_USER first in the record) with the same samples, chains,
 * marks and counts.
 */
#define SESSION_BASIC_TEST(name, swap, mainline)			\
static int test__##name(struct test_suite *test __maybe_unused,	\
			int subtest __maybe_unused)			\
{									\
	return session_test__basic(swap, mainline);			\
}

SESSION_BASIC_TEST(session_pipe, /*swap=*/false, /*mainline=*/false)
SESSION_BASIC_TEST(session_swapped, /*swap=*/true, /*mainline=*/false)
SESSION_BASIC_TEST(session_mainline, /*swap=*/false, /*mainline=*/true)
SESSION_BASIC_TEST(session_mainline_swapped, /*swap=*/true, /*mainline=*/true)

/*
 * The raw data of the sample at @time, as a tracepoint writes it: bytes of
 * no byte order, a run from the time's low byte so that each sample's are
 * its own, 9 or 17 of them, zero padded for the u32 size and the data to
 * fill whole u64s. Returns the size, padding included, as the kernel has it.
 */
static u32 raw__fill(u8 *raw, u64 time)
{
	u32 len = (time / 10) % 2 ? 17 : 9;
	u32 size = PERF_ALIGN(sizeof(u32) + len, sizeof(u64)) - sizeof(u32);

	memset(raw, 0, size);
	for (u32 i = 0; i < len; i++)
		raw[i] = (u8)(time + i);
	return size;
}

static void stream__sample_raw(struct stream *s, u32 tid, u64 time, u64 cookie,
			       const struct ips *kernel)
{
	union perf_event buf;
	u8 raw[MAX_RAW];
	u32 raw_size = raw__fill(raw, time);

	stream__put(s, sample__build_raw(&buf, s->sample_type, tid, time, cookie,
					 kernel, raw, raw_size));
}

/*
 * Parsing a sample of a byte-swapped stream swaps its raw data in place,
 * back to the writer's bytes: what the join holds must be the event as it
 * came, not as parsed, or parsing it again on its way out swaps the raw data
 * back and reads a size out of its first bytes.
 */
static int session_swapped_raw(struct session_test *st)
{
	const struct expect exp[] = {
		/* waited, then joined with TID1's record */
		{ 100, JOINED, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2) },
		/* not deferred, held behind the waiting one */
		{ 105, 0, IPS(CTX_K, KIP2, CTX_U, UIP3) },
		/* waited until the end */
		{ 110, UNRESOLVED, IPS(CTX_K, KIP1) },
		{ 120, JOINED, IPS(CTX_K, KIP3, CTX_U, UIP1, UIP2) },
		/* joined at once, held behind */
		{ 140, JOINED | BACKWARD, IPS(CTX_K, KIP1, CTX_U, UIP1, UIP2) },
		{ 150, JOINED, IPS(CTX_U, UIP3) },
	};
	struct stream s;

	TEST_ASSERT_VAL("stream", stream__open_type(&s, /*swap=*/true, RAW_SAMPLE_TYPE) == 0);
	stream__sample_raw(&s, TID1, 100, COOKIE1, &kernel_a);
	stream__sample_raw(&s, TID2, 105, 0, &kernel_and_user);
	stream__sample_raw(&s, TID2, 110, COOKIE2, &kernel_c);
	stream__sample_raw(&s, TID1, 120, COOKIE1, &kernel_b);
	stream__record(&s, TID1, 130, COOKIE1, &stack_a);
	stream__sample_raw(&s, TID1, 140, COOKIE1, &kernel_c);
	stream__sample_raw(&s, TID3, 150, COOKIE3, &user_mode);
	stream__record(&s, TID3, 160, COOKIE3, &stack_b);

	TEST_ASSERT_VAL("read", session_test__read(st, stream__close(&s)) == 0);
	TEST_ASSERT_VAL("samples", delivered__check(st->samples, st->nr_samples,
						    exp, ARRAY_SIZE(exp)) == TEST_OK);
	for (int i = 0; i < st->nr_samples; i++) {
		const struct delivered *d = &st->samples[i];
		u8 raw[MAX_RAW];
		u32 raw_size = raw__fill(raw, d->time);

		if (d->raw_size == raw_size && !memcmp(d->raw, raw, raw_size))
			continue;
		pr_debug("sample at %" PRIu64 ": raw size %u, expected %u\n",
			 d->time, d->raw_size, raw_size);
		return TEST_FAIL;
	}
	TEST_ASSERT_VAL("joined", st->stats.joined == 4);
	TEST_ASSERT_VAL("backward", st->stats.backward == 1);
	TEST_ASSERT_VAL("unresolved", st->stats.unresolved == 1);
	return TEST_OK;
}

static int test__session_swapped_raw(struct test_suite *test __maybe_unused,
				     int subtest __maybe_unused)
{
	return session_test__run(/*merge=*/true, session_swapped_raw);
}

static void stream__raw(struct stream *s, union perf_event *buf, u16 size)
{
	buf->header.size = size;
	stream__write(s, buf, size);
}

/* Records the join cannot use are counted, never read past nor joined. */
static int session_malformed(struct session_test *st)
{
	const struct expect exp[] = {
		{ 100, JOINED, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP3) },
		{ 110, UNRESOLVED, IPS(CTX_K, KIP1) },
	};
	struct perf_record_callchain_deferred *rec;
	union perf_event buf;
	struct stream s;
	u16 size;

	TEST_ASSERT_VAL("stream", stream__open(&s, /*swap=*/false) == 0);
	stream__sample(&s, TID1, 100, COOKIE1, &kernel_a);
	stream__sample(&s, TID2, 110, COOKIE2, &kernel_c);

	/* a bare header: its sample_id would start before the record */
	record__build(&buf, PID, TID1, 119, COOKIE1, &stack_a);
	stream__raw(&s, &buf, sizeof(buf.header));
	/* truncated: header and cookie, no nr */
	rec = &record__build(&buf, PID, TID1, 120, COOKIE1, &stack_a)->callchain_deferred;
	stream__raw(&s, &buf, offsetof(struct perf_record_callchain_deferred, nr));
	/* the struct without its sample_id */
	record__build(&buf, PID, TID1, 121, COOKIE1, &stack_empty);
	stream__raw(&s, &buf, sizeof(*rec));
	/* nr one too large */
	record__build(&buf, PID, TID1, 122, COOKIE1, &stack_a);
	size = buf.header.size;
	rec->nr = 3;
	stream__raw(&s, &buf, size);
	/* nr that overflows when multiplied */
	record__build(&buf, PID, TID1, 123, COOKIE1, &stack_a);
	size = buf.header.size;
	rec->nr = 1ULL << 61;
	stream__raw(&s, &buf, size);
	/* a zero cookie */
	stream__record(&s, TID1, 130, 0, &stack_a);
	/* no tid */
	stream__put(&s, record__build(&buf, (u32)-1, (u32)-1, 140, COOKIE1, &stack_a));
	/* and the real one: TID1's sample joins it, not any of the above */
	stream__record(&s, TID1, 150, COOKIE1, &stack_b);

	TEST_ASSERT_VAL("read", session_test__read(st, stream__close(&s)) == 0);
	TEST_ASSERT_VAL("samples", delivered__check(st->samples, st->nr_samples,
						    exp, ARRAY_SIZE(exp)) == TEST_OK);
	TEST_ASSERT_VAL("malformed", st->stats.malformed == 7);
	TEST_ASSERT_VAL("records", st->stats.records == 1);
	TEST_ASSERT_VAL("joined", st->stats.joined == 1);
	TEST_ASSERT_VAL("unresolved", st->stats.unresolved == 1);
	TEST_ASSERT_VAL("orphans", st->stats.orphans == 0);
	TEST_ASSERT_VAL("no record out of bounds reaches the tool",
			st->nr_records_out_of_bounds == 0);
	TEST_ASSERT_VAL("the good record reaches the tool", st->nr_records >= 1 &&
			st->record_cookies[st->nr_records - 1] == COOKIE1);
	return TEST_OK;
}

static int test__session_malformed(struct test_suite *test __maybe_unused,
				   int subtest __maybe_unused)
{
	return session_test__run(/*merge=*/true, session_malformed);
}

/*
 * Events with different sample_ids (one has PERF_SAMPLE_CPU, as a tracepoint
 * and a hardware event can): each record is checked and parsed against its
 * own event's, found by the id that ends it.
 */
#define MIXED_ID_TYPE	(PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | \
			 PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN | \
			 PERF_SAMPLE_CALLCHAIN_DEFERRED)

static void stream__attr_type(struct stream *s, u64 sample_type, u64 id)
{
	u64 own = s->sample_type;

	s->sample_type = sample_type;
	stream__attr(s, /*read_format=*/0, id);
	s->sample_type = own;
}

static void stream__mixed_sample(struct stream *s, u64 sample_type, u64 id, u32 tid,
				 u64 time, u64 cookie, const struct ips *kernel)
{
	struct perf_sample sample = {
		.id	= id,
		.tid	= tid,
		.time	= time,
		.cpu	= 1,
		.deferred_cookie = cookie,
	};
	union perf_event buf;

	stream__put(s, sample__synthesize(&buf, sample_type, 0, &sample, kernel));
}

/* A record whose sample_id is { pid, tid, time, [cpu, res,] id }. */
static void stream__mixed_record(struct stream *s, bool with_cpu, u64 id, u32 tid,
				 u64 time, u64 cookie, const struct ips *stack)
{
	union perf_event buf;
	union perf_event *event = record__build(&buf, PID, tid, time, cookie, stack);
	u64 tail[2] = { 1, id };	/* cpu 1, res 0; the id */
	size_t extra = with_cpu ? sizeof(tail) : sizeof(u64);

	if (!event || event->header.size + extra > sizeof(buf)) {
		s->failed = true;
		return;
	}
	memcpy((void *)event + event->header.size, with_cpu ? tail : &tail[1], extra);
	event->header.size += extra;
	stream__put(s, event);
}

static int session_mixed_sample_id(struct session_test *st)
{
	const struct expect exp[] = {
		{ 100, JOINED, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2) },
		{ 110, JOINED, IPS(CTX_K, KIP3, CTX_U, UIP3) },
	};
	static const u64 no_ids[] = { };
	struct stream s = { .fd = -1, };

	/* the first event's sample_id is the larger: the other's records are shorter */
	TEST_ASSERT_VAL("stream", stream__open_events(&s, /*swap=*/false, MIXED_ID_TYPE, 0,
						      no_ids, 0) == 0);
	stream__attr_type(&s, MIXED_ID_TYPE | PERF_SAMPLE_CPU, 1);
	stream__attr_type(&s, MIXED_ID_TYPE, 2);
	stream__mixed_sample(&s, MIXED_ID_TYPE, 2, TID1, 100, COOKIE1, &kernel_a);
	stream__mixed_sample(&s, MIXED_ID_TYPE | PERF_SAMPLE_CPU, 1, TID2, 110, COOKIE2,
			     &kernel_b);
	stream__mixed_record(&s, /*with_cpu=*/false, 2, TID1, 120, COOKIE1, &stack_a);
	stream__mixed_record(&s, /*with_cpu=*/true, 1, TID2, 130, COOKIE2, &stack_b);
	TEST_ASSERT_VAL("read", session_test__read(st, stream__close(&s)) == 0);

	TEST_ASSERT_VAL("samples", delivered__check(st->samples, st->nr_samples,
						    exp, ARRAY_SIZE(exp)) == TEST_OK);
	TEST_ASSERT_VAL("no record malformed", st->stats.malformed == 0);
	TEST_ASSERT_VAL("records", st->nr_records == 2 && st->record_tids[0] == TID1 &&
			st->record_tids[1] == TID2);
	return TEST_OK;
}

static int test__session_mixed_sample_id(struct test_suite *test __maybe_unused,
					 int subtest __maybe_unused)
{
	return session_test__run(/*merge=*/true, session_mixed_sample_id);
}

/* Merge off: the raw view, samples with their cookie and records apart. */
/*
 * Without sample_id_all a record has no tid: the session sees it in the
 * attrs, and no sample waits for a record that could never be its own,
 * whatever the cap. One that waited would go over a one-byte cap.
 */
static int session_no_sample_id_all(struct session_test *st)
{
	static const u64 id = 1;
	u64 queue_size = deferred_callchain_queue_size;
	struct stream s;
	int err;

	TEST_ASSERT_VAL("stream", stream__open_events(&s, /*swap=*/false, SAMPLE_TYPE,
						      /*read_format=*/0, &id, 0) == 0);
	s.no_sample_id = true;
	stream__attr(&s, /*read_format=*/0, id);
	stream__sample(&s, TID1, 100, COOKIE1, &kernel_a);
	for (int i = 0; i < 20; i++)
		stream__sample(&s, TID2, 110 + i, 0, &kernel_and_user);
	stream__record(&s, TID1, 300, COOKIE1, &stack_a);
	deferred_callchain_queue_size = 1;
	err = session_test__read(st, stream__close(&s));
	deferred_callchain_queue_size = queue_size;
	TEST_ASSERT_VAL("read", !err);
	pr_debug("%" PRIu64 " deferred, %" PRIu64 " unresolved, %" PRIu64 " over the cap, %"
		 PRIu64 " joined, %" PRIu64 " malformed records\n", st->stats.deferred,
		 st->stats.unresolved, st->stats.capped, st->stats.joined, st->stats.malformed);
	TEST_ASSERT_VAL("every sample", st->nr_samples == 21);
	TEST_ASSERT_VAL("unresolved at once", st->stats.deferred == 1 &&
			st->stats.unresolved == 1 && !st->stats.capped && !st->stats.joined);
	TEST_ASSERT_VAL("the record has no tid", st->stats.malformed == 1);
	return TEST_OK;
}

static int test__session_no_sample_id_all(struct test_suite *test __maybe_unused,
					  int subtest __maybe_unused)
{
	return session_test__run(/*merge=*/true, session_no_sample_id_all);
}

static int session_merge_off(struct session_test *st)
{
	const struct expect exp[] = {
		{ 100, 0, IPS(CTX_K, KIP1, KIP2) },
		{ 105, 0, IPS(CTX_K, KIP2, CTX_U, UIP3) },
		{ 110, 0, IPS(CTX_K, KIP1) },
		{ 120, 0, IPS(CTX_K, KIP3) },
		{ 140, 0, IPS(CTX_K, KIP1) },
		{ 150, 0, { .nr = 0, } },
		{ 170, 0, IPS(CTX_K, KIP1) },
		{ 190, 0, IPS(CTX_K, KIP3) },
	};
	static const u64 cookies[] = {
		COOKIE1, 0, COOKIE2, COOKIE1, COOKIE1, COOKIE3, COOKIE4, COOKIE5,
	};
	struct stream s;

	TEST_ASSERT_VAL("stream", stream__open(&s, /*swap=*/false) == 0);
	TEST_ASSERT_VAL("stream", stream__basic(&s) == 0);
	TEST_ASSERT_VAL("read", session_test__read(st, stream__close(&s)) == 0);

	TEST_ASSERT_VAL("samples", delivered__check(st->samples, st->nr_samples,
						    exp, ARRAY_SIZE(exp)) == TEST_OK);
	for (size_t i = 0; i < ARRAY_SIZE(exp); i++)
		TEST_ASSERT_VAL("cookie", st->samples[i].cookie == cookies[i]);
	TEST_ASSERT_VAL("records", st->nr_records == 3);
	TEST_ASSERT_VAL("record", st->record_cookies[0] == COOKIE1 &&
			st->record_cookies[1] == COOKIE3 &&
			st->record_cookies[2] == COOKIE5);
	TEST_ASSERT_VAL("no join", st->stats.deferred == 0 && st->stats.joined == 0 &&
			st->stats.unresolved == 0 && st->stats.records == 0);
	return TEST_OK;
}

static int test__session_merge_off(struct test_suite *test __maybe_unused,
				   int subtest __maybe_unused)
{
	return session_test__run(/*merge=*/false, session_merge_off);
}

/*
 * PERF_SAMPLE_READ: a sample's period is its counter's value less the
 * counter's value in the sample before, of any thread. A sample that waits
 * for its record is delivered after later samples: it must take its
 * periods when it comes, in time order, not when it is delivered.
 */
#define READ_SAMPLE_TYPE	(SAMPLE_TYPE | PERF_SAMPLE_READ | PERF_SAMPLE_IDENTIFIER)
#define READ_MAX_COUNTERS	2

/* the leader's id first: the samples are the leader's */
static const u64 read_ids[READ_MAX_COUNTERS] = { 0x101, 0x102 };

struct read_sample {
	u32		tid;
	u64		time;
	u64		cookie;
	const struct ips *kernel;
	u64		values[READ_MAX_COUNTERS];	/* of the counters of read_ids */
};

static void stream__sample_read(struct stream *s, u64 read_format, int nr_counters,
				const struct read_sample *rs)
{
	/* { value, id } per counter: PERF_FORMAT_ID without PERF_FORMAT_LOST */
	u64 values[2 * READ_MAX_COUNTERS];
	struct perf_sample sample = {
		.tid	= rs->tid,
		.time	= rs->time,
		.id	= read_ids[0],
		.deferred_cookie = rs->cookie,
	};
	union perf_event buf;

	if (nr_counters > READ_MAX_COUNTERS || (read_format & PERF_FORMAT_LOST)) {
		s->failed = true;
		return;
	}
	for (int i = 0; i < nr_counters; i++) {
		values[2 * i] = rs->values[i];
		values[2 * i + 1] = read_ids[i];
	}
	if (read_format & PERF_FORMAT_GROUP) {
		sample.read.group.nr = nr_counters;
		sample.read.group.values = (struct sample_read_value *)values;
	} else {
		sample.read.one.value = rs->values[0];
		sample.read.one.id = read_ids[0];
	}
	stream__put(s, sample__synthesize(&buf, s->sample_type, read_format, &sample,
					  rs->kernel));
}

/* A record whose sample_id ends in the id PERF_SAMPLE_IDENTIFIER adds. */
static void stream__record_id(struct stream *s, u32 tid, u64 time, u64 cookie,
			      const struct ips *stack, u64 id)
{
	union perf_event buf;
	union perf_event *event = record__build(&buf, PID, tid, time, cookie, stack);

	if (event && event->header.size + sizeof(u64) <= sizeof(*event)) {
		memcpy((void *)event + event->header.size, &id, sizeof(id));
		event->header.size += sizeof(u64);
	} else {
		event = NULL;
	}
	stream__put(s, event);
}

static int session_read_periods(struct session_test *st, u64 read_format, int nr_counters)
{
	static const struct read_sample samples[] = {
		/* A: waits for TID1's record */
		{ TID1, 100, COOKIE1, &kernel_a, { 1000, 400 } },
		/* B: nothing deferred, held behind A */
		{ TID2, 110, 0, &kernel_and_user, { 3000, 1000 } },
		/* TID1's record comes at 120 */
		/* C: joined at once with it */
		{ TID1, 130, COOKIE1, &kernel_c, { 3500, 1300 } },
	};
	/* delivered in time order: the periods are the differences in that order */
	const struct {
		int		sample;
		unsigned int	flags;
		struct ips	chain;
		u64		periods[READ_MAX_COUNTERS];
	} exp[] = {
		{ 0, JOINED, IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2), { 1000, 400 } },
		{ 1, 0, IPS(CTX_K, KIP2, CTX_U, UIP3), { 3000 - 1000, 1000 - 400 } },
		{ 2, JOINED | BACKWARD, IPS(CTX_K, KIP1, CTX_U, UIP1, UIP2),
		  { 3500 - 3000, 1300 - 1000 } },
	};
	struct stream s;

	TEST_ASSERT_VAL("stream", stream__open_events(&s, /*swap=*/false, READ_SAMPLE_TYPE,
						      read_format, read_ids,
						      nr_counters) == 0);
	stream__sample_read(&s, read_format, nr_counters, &samples[0]);
	stream__sample_read(&s, read_format, nr_counters, &samples[1]);
	stream__record_id(&s, TID1, 120, COOKIE1, &stack_a, read_ids[0]);
	stream__sample_read(&s, read_format, nr_counters, &samples[2]);
	TEST_ASSERT_VAL("read", session_test__read(st, stream__close(&s)) == 0);

	/* one delivery per counter of each sample */
	if (st->nr_samples != (int)ARRAY_SIZE(exp) * nr_counters) {
		pr_debug("delivered %d samples, expected %d\n", st->nr_samples,
			 (int)ARRAY_SIZE(exp) * nr_counters);
		return TEST_FAIL;
	}
	/* all of them first: a failure shows what came after too */
	for (int i = 0; i < st->nr_samples; i++) {
		const struct read_sample *rs = &samples[exp[i / nr_counters].sample];
		const struct delivered *d = &st->samples[i];

		pr_debug("  delivery %d: time %" PRIu64 " tid %u id %#" PRIx64 " evsel %d period %"
			 PRIu64 ", expected time %" PRIu64 " period %" PRIu64 "\n", i, d->time,
			 d->tid, d->id, d->evsel_idx, d->period, rs->time,
			 exp[i / nr_counters].periods[i % nr_counters]);
	}
	for (int i = 0; i < st->nr_samples; i++) {
		const struct read_sample *rs = &samples[exp[i / nr_counters].sample];
		unsigned int flags = exp[i / nr_counters].flags;
		u64 period = exp[i / nr_counters].periods[i % nr_counters];
		u64 value = rs->values[i % nr_counters];
		const struct delivered *d = &st->samples[i];

		TEST_ASSERT_VAL("delivery order", d->time == rs->time && d->tid == rs->tid);
		TEST_ASSERT_VAL("flags", d->flags == flags);
		TEST_ASSERT_VAL("chain", chain__equal(d, &exp[i / nr_counters].chain));
		/* each value's id is its event's, as the attrs' ids say */
		TEST_ASSERT_VAL("id", d->id == read_ids[i % nr_counters]);
		TEST_ASSERT_VAL("evsel", d->evsel_idx == i % nr_counters);
		TEST_ASSERT_VAL("no period larger than the value", d->period <= value);
		TEST_ASSERT_VAL("period in time order", d->period == period);
	}
	TEST_ASSERT_VAL("deferred", st->stats.deferred == 2);
	TEST_ASSERT_VAL("joined", st->stats.joined == 2);
	TEST_ASSERT_VAL("backward", st->stats.backward == 1);
	TEST_ASSERT_VAL("unresolved", st->stats.unresolved == 0);
	TEST_ASSERT_VAL("records", st->nr_records == 1 && st->record_cookies[0] == COOKIE1);
	return TEST_OK;
}

/* With one counter, then with a group of two */
static int test__session_read_periods(struct test_suite *test __maybe_unused,
				      int subtest __maybe_unused)
{
	static const struct {
		u64	read_format;
		int	nr_counters;
	} variants[] = {
		{ PERF_FORMAT_ID, 1 },
		{ PERF_FORMAT_ID | PERF_FORMAT_GROUP, 2 },
	};
	struct session_test *st = zalloc(sizeof(*st));
	int ret = TEST_OK;

	if (!st)
		return TEST_FAIL;
	for (size_t i = 0; i < ARRAY_SIZE(variants); i++) {
		pr_debug("read_format %#" PRIx64 ", %d counters\n", variants[i].read_format,
			 variants[i].nr_counters);
		session_test__init(st, /*merge=*/true);
		if (session_read_periods(st, variants[i].read_format,
					 variants[i].nr_counters) != TEST_OK)
			ret = TEST_FAIL;
	}
	free(st);
	return ret;
}

/*
 * Callchain views: a sample whose user part is missing or may be another
 * stay's gets one more frame, outermost, that says so.
 */
#define MARK_UNRESOLVED	"[user stack unresolved]"
#define MARK_AMBIGUOUS	"[user stack ambiguous]"

static void cursor__free(struct callchain_cursor *cursor)
{
	struct callchain_cursor_node *node, *next;

	callchain_cursor_reset(cursor);
	for (node = cursor->first; node; node = next) {
		next = node->next;
		free(node);
	}
	cursor->first = NULL;
	cursor->last = &cursor->first;
}

/*
 * Checks that @cursor holds frames of the ips in @ips, none resolved, and
 * @mark, NULL for none, first when @mark_first, else last.
 */
static int cursor__check(struct callchain_cursor *cursor, const u64 *ips, u64 nr,
			 const char *mark, bool mark_first)
{
	u64 nr_exp = nr + (mark ? 1 : 0);
	u64 mark_pos = mark_first ? 0 : nr;
	struct callchain_cursor_node *node;
	u64 i = 0;

	if (cursor->nr != nr_exp) {
		pr_debug("cursor has %" PRIu64 " entries, expected %" PRIu64 "\n",
			 cursor->nr, nr_exp);
		return TEST_FAIL;
	}
	callchain_cursor_commit(cursor);
	while ((node = callchain_cursor_current(cursor)) != NULL) {
		const char *name = node->ms.sym ? node->ms.sym->name : NULL;

		if (mark && cursor->pos == mark_pos) {
			struct dso *dso = node->ms.map ? map__dso(node->ms.map) : NULL;

			if (!name || strcmp(name, mark)) {
				pr_debug("entry %" PRIu64 ": %s, expected %s\n",
					 cursor->pos, name ?: "no symbol", mark);
				return TEST_FAIL;
			}
			/*
			 * A frame as every printer and sort key expects one: in
			 * the thread's maps, in a map of its own, a dso named
			 * after the mark (so the two marks never merge).
			 */
			if (!node->ms.maps || !dso || strcmp(dso__name(dso), mark) ||
			    map__map_ip(node->ms.map, node->ip) != node->ms.sym->start) {
				pr_debug("entry %" PRIu64 ": mark %s without its map and dso\n",
					 cursor->pos, mark);
				return TEST_FAIL;
			}
		} else if (i == nr || node->ip != ips[i++] || name) {
			pr_debug("entry %" PRIu64 ": %#" PRIx64 " %s\n", cursor->pos,
				 node->ip, name ?: "no symbol");
			return TEST_FAIL;
		}
		callchain_cursor_advance(cursor);
	}
	return TEST_OK;
}

static const struct {
	unsigned int	flags;
	const char	*mark;
} deferred_marks[] = {
	{ UNRESOLVED,			MARK_UNRESOLVED },
	{ JOINED | AMBIGUOUS,		MARK_AMBIGUOUS },
	{ JOINED | BACKWARD | AMBIGUOUS,	MARK_AMBIGUOUS },
	{ JOINED,			NULL },
	{ JOINED | BACKWARD,		NULL },
	{ 0,				NULL },
};

/* callchain_cursor__append_deferred_mark() appends the mark, if any, alone. */
static int deferred_mark_append(struct callchain_cursor *cursor)
{
	static const u64 before[] = { UIP1 };
	struct machines machines;
	struct thread *thread;
	int ret = TEST_FAIL;

	machines__init(&machines);
	thread = machine__findnew_thread(&machines.host, PID, TID1);
	if (!thread)
		goto out;

	for (size_t i = 0; i < ARRAY_SIZE(deferred_marks); i++) {
		struct perf_sample sample = { .deferred_flags = deferred_marks[i].flags, };
		struct map_symbol ms = { .sym = NULL, };

		pr_debug("  flags %#x\n", sample.deferred_flags);
		/* on an empty cursor */
		callchain_cursor_reset(cursor);
		if (callchain_cursor__append_deferred_mark(cursor, thread, &sample) ||
		    cursor__check(cursor, NULL, 0, deferred_marks[i].mark, false) != TEST_OK) {
			pr_debug("the mark alone on an empty cursor\n");
			goto out;
		}
		/* after a frame: appended, the frame kept */
		callchain_cursor_reset(cursor);
		if (callchain_cursor_append(cursor, UIP1, &ms, false, NULL, 0, 0, 0, NULL) ||
		    callchain_cursor__append_deferred_mark(cursor, thread, &sample) ||
		    cursor__check(cursor, before, 1, deferred_marks[i].mark, false) != TEST_OK) {
			pr_debug("the mark after a frame\n");
			goto out;
		}
	}
	ret = TEST_OK;
out:
	/* the frames hold references to the thread's maps */
	callchain_cursor_reset(cursor);
	thread__put(thread);
	machines__exit(&machines);
	return ret;
}

/*
 * Through __thread__resolve_callchain(), with a thread of no maps: the mark
 * is the outermost frame, last in callee order and first in caller order.
 */
static int deferred_mark_resolve(struct callchain_cursor *cursor)
{
	static const u64 joined_ips[] = { KIP1, KIP2, UIP1, UIP2 };
	static const u64 kernel_ips[] = { KIP1, KIP2 };
	const struct ips joined = IPS(CTX_K, KIP1, KIP2, CTX_U, UIP1, UIP2);
	struct perf_event_attr attr = {
		.type		= PERF_TYPE_SOFTWARE,
		.config		= PERF_COUNT_SW_CPU_CLOCK,
		.sample_type	= SAMPLE_TYPE,
	};
	enum chain_order order = callchain_param.order;
	struct machines machines;
	struct thread *thread;
	struct evsel *evsel;
	int ret = TEST_FAIL;

	machines__init(&machines);
	thread = machine__findnew_thread(&machines.host, PID, TID1);
	evsel = evsel__new(&attr);
	if (!thread || !evsel)
		goto out;

	for (int caller = 0; caller < 2; caller++) {
		callchain_param.order = caller ? ORDER_CALLER : ORDER_CALLEE;

		for (size_t i = 0; i < ARRAY_SIZE(deferred_marks); i++) {
			unsigned int flags = deferred_marks[i].flags;
			/* an unresolved sample has its kernel part only */
			const struct ips *chain = flags & UNRESOLVED ? &kernel_a : &joined;
			const u64 *ips = flags & UNRESOLVED ? kernel_ips : joined_ips;
			u64 nr = flags & UNRESOLVED ? ARRAY_SIZE(kernel_ips) :
						      ARRAY_SIZE(joined_ips);
			u64 buf[1 + MAX_IPS] = { chain->nr, };
			struct perf_sample sample = {
				.ip		= KIP1,
				.pid		= PID,
				.tid		= TID1,
				.callchain	= (struct ip_callchain *)buf,
				.deferred_flags	= flags,
			};
			u64 exp[MAX_IPS];

			memcpy(&buf[1], chain->ips, chain->nr * sizeof(u64));
			for (u64 j = 0; j < nr; j++)
				exp[j] = caller ? ips[nr - 1 - j] : ips[j];

			pr_debug("  %s order, flags %#x\n", caller ? "caller" : "callee", flags);
			if (thread__resolve_callchain(thread, cursor, evsel, &sample, NULL, NULL,
						      PERF_MAX_STACK_DEPTH)) {
				pr_debug("thread__resolve_callchain failed\n");
				goto out;
			}
			if (cursor__check(cursor, exp, nr, deferred_marks[i].mark,
					  /*mark_first=*/caller) != TEST_OK)
				goto out;
		}
	}
	ret = TEST_OK;
out:
	callchain_param.order = order;
	/* the frames hold references to the thread's maps */
	callchain_cursor_reset(cursor);
	evsel__delete(evsel);
	thread__put(thread);
	machines__exit(&machines);
	return ret;
}

static int test__deferred_mark(struct test_suite *test __maybe_unused,
			       int subtest __maybe_unused)
{
	struct callchain_cursor cursor = { .first = NULL, };
	int ret;

	cursor.last = &cursor.first;
	ret = deferred_mark_append(&cursor);
	if (ret == TEST_OK)
		ret = deferred_mark_resolve(&cursor);
	cursor__free(&cursor);
	return ret;
}

#define ENGINE_TEST(name)						\
static int test__##name(struct test_suite *test __maybe_unused,	\
			int subtest __maybe_unused)			\
{									\
	return engine__run(name);					\
}

ENGINE_TEST(forward_join)
ENGINE_TEST(samples_wait)
ENGINE_TEST(backward_join)
ENGINE_TEST(unresolved_samples)
ENGINE_TEST(orphan_records)
ENGINE_TEST(ambiguous_joins)
ENGINE_TEST(threads)
ENGINE_TEST(stats)
ENGINE_TEST(copies)
ENGINE_TEST(queue_cap)
ENGINE_TEST(records_without_tid)
ENGINE_TEST(indexed_file)

/*
 * A byte-swapped sample's raw data is swapped back in place in whole u64s,
 * from its u32 size on: the check covers those u64s, not only the bytes the
 * size names, or a short raw area at the end of an event swaps bytes past it.
 */
static int test__swapped_raw_bounds(struct test_suite *test __maybe_unused,
				    int subtest __maybe_unused)
{
	struct perf_event_attr attr = {
		.type		= PERF_TYPE_SOFTWARE,
		.config		= PERF_COUNT_SW_CPU_CLOCK,
		.sample_type	= PERF_SAMPLE_RAW,
	};
	union perf_event ev = { .header = { .type = PERF_RECORD_SAMPLE, }, };
	struct evsel *evsel = evsel__new(&attr);
	u64 *words = (u64 *)&ev;
	struct perf_sample sample;
	u8 *bytes = (u8 *)&ev;
	int ret = TEST_FAIL, err;

	if (!evsel)
		return TEST_FAIL;
	evsel->needs_swap = true;
	/*
	 * The header, the raw u32 size, and 9 to 12 bytes: the size names
	 * bytes that end inside the second u64, which the swap takes whole.
	 */
	for (u32 raw_size = 9; raw_size <= 12; raw_size++) {
		u32 size_word[2] = { bswap_32(raw_size), 0 };

		/* as the session leaves it: written swapped, then swapped as u64s */
		memcpy(&words[1], size_word, sizeof(u64));
		words[1] = bswap_64(words[1]);
		memset(&words[2], 0xaa, 2 * sizeof(u64));
		ev.header.size = 8 + sizeof(u32) + raw_size;

		err = evsel__parse_sample(evsel, &ev, &sample);
		if (raw_size < 12 && err != -EFAULT) {
			pr_debug("raw size %u in a %u-byte event: parsed\n", raw_size,
				 ev.header.size);
			goto out;
		}
		if (raw_size == 12 && (err || sample.raw_size != 12)) {
			pr_debug("a raw area of whole u64s did not parse\n");
			goto out;
		}
		for (u32 i = ev.header.size; i < 4 * sizeof(u64); i++) {
			if (bytes[i] != 0xaa) {
				pr_debug("raw size %u: byte %u past the event changed\n",
					 raw_size, i);
				goto out;
			}
		}
	}
	ret = TEST_OK;
out:
	evsel__delete(evsel);
	return ret;
}

static struct test_case tests__deferred_callchain[] = {
	TEST_CASE("Deferred callchain: rule 1, forward join", forward_join),
	TEST_CASE("Deferred callchain: rule 1, samples wait, in time order", samples_wait),
	TEST_CASE("Deferred callchain: rule 2, backward join", backward_join),
	TEST_CASE("Deferred callchain: rule 3, unresolved samples", unresolved_samples),
	TEST_CASE("Deferred callchain: rule 4, orphan records", orphan_records),
	TEST_CASE("Deferred callchain: rule 5, ambiguous joins", ambiguous_joins),
	TEST_CASE("Deferred callchain: key is (tid, cookie)", threads),
	TEST_CASE("Deferred callchain: statistics add up", stats),
	TEST_CASE("Deferred callchain: events are copied", copies),
	TEST_CASE("Deferred callchain: the queue's memory cap", queue_cap),
	TEST_CASE("Deferred callchain: records without tid", records_without_tid),
	TEST_CASE("Deferred callchain: a file's index of records", indexed_file),
	TEST_CASE("Deferred callchain: the index keys on tid, 64-bit cookies",
		  index_keys),
	TEST_CASE("Deferred callchain: a file and a pipe, one answer", one_answer),
	TEST_CASE("Deferred callchain: session, pipe mode", session_pipe),
	TEST_CASE("Deferred callchain: session, byte-swapped pipe", session_swapped),
	TEST_CASE("Deferred callchain: session, Linux 6.19's format", session_mainline),
	TEST_CASE("Deferred callchain: session, Linux 6.19's format byte-swapped",
		  session_mainline_swapped),
	TEST_CASE("Deferred callchain: session, byte-swapped samples with raw data",
		  session_swapped_raw),
	TEST_CASE("Deferred callchain: session, malformed records", session_malformed),
	TEST_CASE("Deferred callchain: session, events with different sample_ids",
		  session_mixed_sample_id),
	TEST_CASE("Deferred callchain: byte-swapped raw data is checked in whole u64s",
		  swapped_raw_bounds),
	TEST_CASE("Deferred callchain: session, records without tid",
		  session_no_sample_id_all),
	TEST_CASE("Deferred callchain: session, merge off", session_merge_off),
	TEST_CASE("Deferred callchain: session, PERF_SAMPLE_READ periods in time order",
		  session_read_periods),
	TEST_CASE("Deferred callchain: a mark for unresolved and ambiguous stacks",
		  deferred_mark),
	{ .name = NULL, }
};

struct test_suite suite__deferred_callchain = {
	.desc = "Deferred callchain join",
	.test_cases = tests__deferred_callchain,
};
