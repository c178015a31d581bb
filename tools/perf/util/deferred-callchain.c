// SPDX-License-Identifier: GPL-2.0
/*
 * Joins the samples of events with PERF_SAMPLE_CALLCHAIN_DEFERRED with the
 * PERF_RECORD_CALLCHAIN_DEFERRED that carries their user stack, and hands
 * every event on in time order.
 *
 * Events come in time order. Per thread we keep the samples waiting for
 * their record and the last record seen:
 *  - a sample whose cookie is the one of the thread's last record is joined
 *    at once (the kernel took it after the walk, in the same stay);
 *  - otherwise it waits; a record joins the waiting samples with its cookie
 *    and resolves the others as unresolved: a newer record means theirs is
 *    lost. So do the thread's exit and the end of the data;
 *  - a record that serves no sample is an orphan;
 *  - a join is ambiguous when records were lost between the sample and its
 *    record: lost records come with no tid, so any loss counts.
 *
 * A waiting sample holds back every event after it: they queue behind it,
 * copied, and go out in order as soon as nothing older waits. The queue is
 * bounded: past its cap the oldest waiting sample is given up on. Each
 * event costs one hash lookup at most, and a held one its bytes plus one
 * struct deferred_event.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/list.h>
#include <linux/string.h>
#include <linux/zalloc.h>
#include <perf/event.h>
#include <subcmd/parse-options.h>

#include "callchain.h"
#include "debug.h"
#include "deferred-callchain.h"
#include "dso.h"
#include "event.h"
#include "evlist.h"
#include "evsel.h"
#include "hashmap.h"
#include "map.h"
#include "map_symbol.h"
#include "sample.h"
#include "symbol.h"
#include "thread.h"

u64 deferred_callchain_queue_size = DEFERRED_CALLCHAIN__QUEUE_SIZE;

/*
 * Not perf_config_u64(): it takes "-1" for 16 EiB and lets a size with a
 * suffix overflow. The one parser for the option and the perfconfig key.
 */

int deferred_callchain__parse_queue_size(const char *str)
{
	static const char units[] = "kmg";
	unsigned int shift = 0;
	const char *unit;
	char *end;
	u64 size;

	errno = 0;
	size = strtoull(str, &end, 0);
	unit = *end ? strchr(units, tolower(*end)) : NULL;
	if (unit) {
		shift = 10 * (unit - units + 1);
		end++;
	}
	if (!isdigit(*str) || errno || *end || !size || size > (ULLONG_MAX >> shift)) {
		pr_err("Invalid deferred callchain queue size: '%s' (a size in bytes, k, m or g)\n",
		       str);
		return -1;
	}
	deferred_callchain_queue_size = size << shift;
	return 0;
}

int deferred_callchain__queue_size_opt(const struct option *opt __maybe_unused,
				       const char *str, int unset)
{
	if (unset) {
		deferred_callchain_queue_size = DEFERRED_CALLCHAIN__QUEUE_SIZE;
		return 0;
	}
	return deferred_callchain__parse_queue_size(str);
}

/* A record, shared by the thread that saw it last and the samples it joined. */
struct deferred_record {
	int			refcnt;
	union perf_event	event;	/* header.size bytes */
};

/* An event held in the queue, waiting or behind a waiting sample. */
struct deferred_event {
	struct list_head	node;		/* in the queue, in time order */
	struct list_head	waiting;	/* in its thread's, while it waits */
	struct deferred_record	*record;	/* the one it was joined with */
	u64			file_offset;
	const char		*file_path;
	u64			cookie;
	u64			lost_generation;
	unsigned int		flags;		/* 0 while it waits */
	union perf_event	event;		/* a copy: header.size bytes */
};

struct deferred_thread {
	struct list_head	waiting;
	struct deferred_record	*last_record;
	u64			last_record_lost_generation;
	bool			last_record_served;
};

static size_t tid_hash(long key, void *ctx __maybe_unused)
{
	return key;
}

static bool tid_equal(long key1, long key2, void *ctx __maybe_unused)
{
	return key1 == key2;
}

int deferred_callchains__init(struct deferred_callchains *dc,
			      deferred_callchain_deliver_fn deliver, void *priv)
{
	memset(dc, 0, sizeof(*dc));
	dc->threads = hashmap__new(tid_hash, tid_equal, NULL);
	if (IS_ERR(dc->threads)) {
		dc->threads = NULL;
		return -ENOMEM;
	}
	INIT_LIST_HEAD(&dc->queue);
	dc->max_queued_bytes = deferred_callchain_queue_size;
	dc->deliver = deliver;
	dc->priv = priv;
	return 0;
}

static struct deferred_record *deferred_record__new(const union perf_event *event)
{
	struct deferred_record *record;

	record = malloc(offsetof(struct deferred_record, event) + event->header.size);
	if (!record)
		return NULL;
	record->refcnt = 1;
	memcpy(&record->event, event, event->header.size);
	return record;
}

static struct deferred_record *deferred_record__get(struct deferred_record *record)
{
	if (record)
		record->refcnt++;
	return record;
}

static void deferred_record__put(struct deferred_record *record)
{
	if (record && --record->refcnt == 0)
		free(record);
}

static const union perf_event *deferred_record__event(const struct deferred_record *record)
{
	return record ? &record->event : NULL;
}

static struct deferred_thread *deferred_thread__findnew(struct deferred_callchains *dc,
							u32 tid)
{
	struct deferred_thread *thread;

	if (hashmap__find(dc->threads, tid, &thread))
		return thread;

	thread = zalloc(sizeof(*thread));
	if (!thread)
		return NULL;
	INIT_LIST_HEAD(&thread->waiting);
	if (hashmap__add(dc->threads, tid, thread)) {
		free(thread);
		return NULL;
	}
	return thread;
}

static void deferred_thread__forget_record(struct deferred_callchains *dc,
					   struct deferred_thread *thread)
{
	if (thread->last_record && !thread->last_record_served)
		dc->stats.orphans++;
	deferred_record__put(thread->last_record);
	thread->last_record = NULL;
}

static unsigned int deferred_callchains__count(struct deferred_callchains *dc,
					       unsigned int flags)
{
	if (flags & DEFERRED_CALLCHAIN__UNRESOLVED) {
		dc->stats.unresolved++;
	} else {
		dc->stats.joined++;
		if (flags & DEFERRED_CALLCHAIN__BACKWARD)
			dc->stats.backward++;
		if (flags & DEFERRED_CALLCHAIN__AMBIGUOUS)
			dc->stats.ambiguous++;
	}
	return flags;
}

static size_t deferred_event__bytes(const struct deferred_event *held)
{
	return offsetof(struct deferred_event, event) + held->event.header.size;
}

static void deferred_event__free(struct deferred_event *held)
{
	deferred_record__put(held->record);
	free(held);
}

/* Delivers what heads the queue, up to the oldest sample still waiting. */
static int deferred_callchains__drain(struct deferred_callchains *dc)
{
	while (!list_empty(&dc->queue)) {
		struct deferred_event *held = list_first_entry(&dc->queue,
							       struct deferred_event, node);
		int err;

		if (!list_empty(&held->waiting))
			return 0;
		list_del(&held->node);
		dc->queued_bytes -= deferred_event__bytes(held);
		err = dc->deliver(dc, &held->event, /*sample=*/NULL,
				  deferred_record__event(held->record), held->flags,
				  held->file_offset, held->file_path);
		deferred_event__free(held);
		if (err)
			return err;
	}
	return 0;
}

/* A waiting sample learns its fate: joined with @record, or unresolved. */
static void deferred_event__resolve(struct deferred_callchains *dc,
				    struct deferred_event *held,
				    struct deferred_record *record)
{
	unsigned int flags = DEFERRED_CALLCHAIN__UNRESOLVED;

	if (record && record->event.callchain_deferred.cookie == held->cookie) {
		flags = DEFERRED_CALLCHAIN__JOINED;
		if (held->lost_generation != dc->lost_generation)
			flags |= DEFERRED_CALLCHAIN__AMBIGUOUS;
		held->record = deferred_record__get(record);
	}
	held->flags = deferred_callchains__count(dc, flags);
	list_del_init(&held->waiting);
	dc->nr_waiting--;
}

/* Resolves the thread's waiting samples: joined with @record, or unresolved. */
static void deferred_thread__resolve(struct deferred_callchains *dc,
				     struct deferred_thread *thread,
				     struct deferred_record *record)
{
	struct deferred_event *held, *tmp;

	list_for_each_entry_safe(held, tmp, &thread->waiting, waiting)
		deferred_event__resolve(dc, held, record);
}

/* Past the cap, the oldest waiting samples are given up on. */
static int deferred_callchains__trim(struct deferred_callchains *dc)
{
	while (dc->queued_bytes > dc->max_queued_bytes && !list_empty(&dc->queue)) {
		struct deferred_event *held = list_first_entry(&dc->queue,
							       struct deferred_event, node);
		int err;

		if (!list_empty(&held->waiting)) {
			deferred_event__resolve(dc, held, NULL);
			dc->stats.capped++;
		}
		err = deferred_callchains__drain(dc);
		if (err)
			return err;
	}
	return 0;
}

/*
 * Hands the event on: at once when nothing waits, else behind what does,
 * as a copy (@copy if there is one). Takes @copy and a reference to @record.
 */
static int deferred_callchains__pass(struct deferred_callchains *dc,
				     union perf_event *event, struct perf_sample *sample,
				     union perf_event *copy, struct deferred_record *record,
				     unsigned int flags, u64 cookie,
				     u64 file_offset, const char *file_path,
				     struct deferred_thread *wait_in)
{
	struct deferred_event *held;

	if (list_empty(&dc->queue) && !wait_in) {
		free(copy);
		return dc->deliver(dc, event, sample, deferred_record__event(record), flags,
				   file_offset, file_path);
	}

	held = malloc(offsetof(struct deferred_event, event) + event->header.size);
	if (!held) {
		free(copy);
		return -ENOMEM;
	}
	memcpy(&held->event, copy ?: event, event->header.size);
	free(copy);
	held->record = deferred_record__get(record);
	held->file_offset = file_offset;
	held->file_path = file_path;
	held->cookie = cookie;
	held->lost_generation = dc->lost_generation;
	held->flags = flags;
	INIT_LIST_HEAD(&held->waiting);
	if (wait_in) {
		list_add_tail(&held->waiting, &wait_in->waiting);
		dc->nr_waiting++;
	}
	list_add_tail(&held->node, &dc->queue);
	dc->queued_bytes += deferred_event__bytes(held);
	return deferred_callchains__trim(dc);
}

/*
 * A file's index, per thread: its records and its exit, in the order the
 * reader delivers them (time, then place in the file). The index applies
 * the rules the queue applies to a stream, so that a file and a pipe of
 * the same events give one answer: a sample joins the thread's last
 * record before it if that has its cookie (rule 2, backward), else the
 * thread's next event if that is a record with its cookie (rule 1); a
 * record with another cookie, the thread's exit or nothing at all in
 * between means the record is not coming (rule 3). Duplicates, and
 * cookies that come round again, are told apart by where they are.
 *
 * The index runs ahead of the reader only as far as a sample needs: up to
 * its thread's next event, and until nothing before that can still come
 * (the horizon). Behind the reader, a thread keeps its last event only,
 * for the samples after it (rule 2). So the index holds what lies between
 * the samples being read and their records, whatever the file's size.
 */
struct deferred_indexed {
	u64				time;
	u64				offset;
	union perf_event		*record;	/* a copy; NULL: the thread's exit */
	bool				used;
};

struct deferred_indexed_thread {
	struct deferred_indexed		*events;
	size_t				nr;
	size_t				size;
};

/* What the index holds for a thread, and for each of its events */
#define DEFERRED_INDEXED_THREAD__BYTES	(sizeof(struct deferred_indexed_thread) + \
					 sizeof(struct hashmap_entry))

static u64 deferred_indexed__bytes(const struct deferred_indexed *indexed)
{
	return sizeof(*indexed) + (indexed->record ? indexed->record->header.size : 0);
}

static size_t deferred_indexed__hash(long key, void *ctx)
{
	struct deferred_callchains *dc = ctx;

	dc->index_hashes++;
	return key;
}

static bool deferred_indexed__equal(long key1, long key2, void *ctx)
{
	struct deferred_callchains *dc = ctx;

	dc->index_compares++;
	return key1 == key2;
}

/* The horizon once the whole file is indexed */
#define DEFERRED_INDEX__END		(~0ULL)

/* The first sweep of what no sample can use once the index holds this */
#define DEFERRED_INDEX__SWEEP_BYTES	(256ULL << 10)

int deferred_callchains__index_begin(struct deferred_callchains *dc,
				     deferred_index_scan_fn scan, bool in_file_order)
{
	if (dc->index)
		return 0;
	dc->index = hashmap__new(deferred_indexed__hash, deferred_indexed__equal, dc);
	if (IS_ERR(dc->index)) {
		dc->index = NULL;
		return -ENOMEM;
	}
	dc->index_scan = scan;
	dc->index_in_file_order = in_file_order;
	dc->index_horizon = 0;
	dc->index_watermark = 0;
	dc->index_sweep_bytes = DEFERRED_INDEX__SWEEP_BYTES;
	return 0;
}

static struct deferred_indexed_thread *
deferred_callchains__index_thread(struct deferred_callchains *dc, u32 tid)
{
	struct deferred_indexed_thread *thread;

	if (!hashmap__find(dc->index, tid, &thread))
		return NULL;
	return thread;
}

/* (time, offset) order: the reader's */
static int deferred_indexed__cmp(const struct deferred_indexed *l,
				 const struct deferred_indexed *r)
{
	if (l->time != r->time)
		return l->time < r->time ? -1 : 1;
	return l->offset < r->offset ? -1 : l->offset > r->offset;
}

static void deferred_callchains__index_grew(struct deferred_callchains *dc, u64 bytes)
{
	dc->index_bytes += bytes;
	if (dc->index_bytes > dc->index_peak_bytes)
		dc->index_peak_bytes = dc->index_bytes;
}

static int deferred_callchains__index_add(struct deferred_callchains *dc, u32 tid,
					  u64 time, u64 offset,
					  const union perf_event *record)
{
	struct deferred_indexed_thread *thread;
	struct deferred_indexed *indexed;
	union perf_event *copy = NULL;
	size_t at;
	int err = deferred_callchains__index_begin(dc, /*scan=*/NULL, dc->index_in_file_order);

	if (err)
		return err;
	thread = deferred_callchains__index_thread(dc, tid);
	if (!thread) {
		thread = zalloc(sizeof(*thread));
		if (!thread)
			return -ENOMEM;
		if (hashmap__add(dc->index, tid, thread)) {
			free(thread);
			return -ENOMEM;
		}
		deferred_callchains__index_grew(dc, DEFERRED_INDEXED_THREAD__BYTES);
	}
	if (thread->nr == thread->size) {
		size_t size = thread->size ? 2 * thread->size : 4;
		void *events = realloc(thread->events, size * sizeof(*thread->events));

		if (!events)
			return -ENOMEM;
		thread->events = events;
		thread->size = size;
	}
	if (record) {
		copy = memdup(record, record->header.size);
		if (!copy)
			return -ENOMEM;
	}
	/*
	 * A file is written per CPU buffer: a thread that moved may have its
	 * events out of order within a round, never by much.
	 */
	at = thread->nr;
	indexed = &thread->events[at];
	indexed->time = time;
	indexed->offset = offset;
	while (at && deferred_indexed__cmp(&thread->events[at - 1], indexed) > 0)
		at--;
	memmove(&thread->events[at + 1], &thread->events[at],
		(thread->nr - at) * sizeof(*thread->events));
	indexed = &thread->events[at];
	indexed->time = time;
	indexed->offset = offset;
	indexed->record = copy;
	indexed->used = false;
	thread->nr++;
	deferred_callchains__index_grew(dc, deferred_indexed__bytes(indexed));
	return 0;
}

int deferred_callchains__index_record(struct deferred_callchains *dc,
				      const union perf_event *record, u32 tid,
				      u64 time, u64 offset)
{
	int err = deferred_callchains__index_add(dc, tid, time, offset, record);

	if (!err)
		dc->index_records++;
	return err;
}

int deferred_callchains__index_exit(struct deferred_callchains *dc, u32 tid,
				    u64 time, u64 offset)
{
	return deferred_callchains__index_add(dc, tid, time, offset, /*record=*/NULL);
}

int deferred_callchains__index_lost(struct deferred_callchains *dc, u64 time)
{
	size_t at;

	if (dc->nr_lost_times == dc->lost_times_size) {
		size_t size = dc->lost_times_size ? 2 * dc->lost_times_size : 64;
		u64 *times = realloc(dc->lost_times, size * sizeof(*times));

		if (!times)
			return -ENOMEM;
		dc->lost_times = times;
		dc->lost_times_size = size;
	}
	/* sorted as they come: out of order only within a round */
	for (at = dc->nr_lost_times; at && dc->lost_times[at - 1] > time; at--)
		dc->lost_times[at] = dc->lost_times[at - 1];
	dc->lost_times[at] = time;
	dc->nr_lost_times++;
	return 0;
}

void deferred_callchains__index_horizon(struct deferred_callchains *dc, u64 horizon)
{
	if (horizon > dc->index_horizon)
		dc->index_horizon = horizon;
}

int deferred_callchains__index_done(struct deferred_callchains *dc)
{
	/* a file without records is indexed too: its samples never wait */
	int err = deferred_callchains__index_begin(dc, /*scan=*/NULL, dc->index_in_file_order);

	if (err)
		return err;
	dc->index_scan = NULL;
	dc->index_horizon = DEFERRED_INDEX__END;
	return 0;
}

/* The losses up to @time, from the sorted times. */
static size_t deferred_callchains__lost_before(struct deferred_callchains *dc, u64 time)
{
	size_t lo = 0, hi = dc->nr_lost_times;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (dc->lost_times[mid] <= time)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first of the thread's events after (@time, @offset). */
static size_t deferred_indexed_thread__next(const struct deferred_indexed_thread *thread,
					    u64 time, u64 offset)
{
	const struct deferred_indexed here = { .time = time, .offset = offset, };
	size_t lo = 0, hi = thread->nr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (deferred_indexed__cmp(&thread->events[mid], &here) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Frees the thread's first @nr events: no sample can use them any more. */
static void deferred_indexed_thread__retire(struct deferred_callchains *dc,
					    struct deferred_indexed_thread *thread, size_t nr)
{
	if (!nr)
		return;
	for (size_t i = 0; i < nr; i++) {
		dc->index_bytes -= deferred_indexed__bytes(&thread->events[i]);
		free(thread->events[i].record);
	}
	thread->nr -= nr;
	memmove(thread->events, &thread->events[nr], thread->nr * sizeof(*thread->events));
}

/*
 * Frees what no sample can use any more: every sample to come is at or
 * after the watermark, so a thread needs only its last event before it.
 * A thread left with nothing but its exit behind the watermark is gone.
 */
static void deferred_callchains__index_sweep(struct deferred_callchains *dc)
{
	struct hashmap_entry *entry, *tmp;
	size_t bkt;

	hashmap__for_each_entry_safe(dc->index, entry, tmp, bkt) {
		struct deferred_indexed_thread *thread = entry->pvalue;
		size_t next = deferred_indexed_thread__next(thread, dc->index_watermark, 0);

		deferred_indexed_thread__retire(dc, thread, next ? next - 1 : 0);
		if (thread->nr && (thread->events[0].record ||
				   thread->events[0].time >= dc->index_watermark))
			continue;
		deferred_indexed_thread__retire(dc, thread, thread->nr);
		hashmap__delete(dc->index, entry->key, NULL, NULL);
		free(thread->events);
		free(thread);
		dc->index_bytes -= DEFERRED_INDEXED_THREAD__BYTES;
	}
	dc->index_sweep_bytes = max_t(u64, 2 * dc->index_bytes, DEFERRED_INDEX__SWEEP_BYTES);
}

/*
 * Whether the index holds all a sample of @thread at (@time, @offset)
 * needs: every event before it, and its thread's next one (@next) with
 * everything before that.
 */
static bool deferred_callchains__index_knows(struct deferred_callchains *dc,
					     struct deferred_indexed_thread *thread,
					     size_t next, u64 time)
{
	if (dc->index_horizon == DEFERRED_INDEX__END)
		return true;
	if (dc->index_horizon <= time || !thread)
		return false;
	return next < thread->nr && thread->events[next].time < dc->index_horizon;
}

/*
 * Indexes as far as a sample of @tid at (@time, @offset) needs, and
 * returns its thread's index, NULL if it has none, in *@thread and the
 * thread's next event after it in *@next. When that is past the memory
 * cap, even with what no sample can use freed, the sample is given up.
 */
static int deferred_callchains__index_until(struct deferred_callchains *dc, u32 tid,
					    u64 time, u64 offset,
					    struct deferred_indexed_thread **thread,
					    size_t *next, bool *gave_up)
{
	for (;;) {
		int ret;

		*thread = deferred_callchains__index_thread(dc, tid);
		*next = *thread ? deferred_indexed_thread__next(*thread, time, offset) : 0;
		if (deferred_callchains__index_knows(dc, *thread, *next, time))
			return 0;
		if (dc->index_bytes > dc->max_queued_bytes) {
			deferred_callchains__index_sweep(dc);
			if (dc->index_bytes > dc->max_queued_bytes) {
				*gave_up = true;
				*thread = deferred_callchains__index_thread(dc, tid);
				*next = *thread ?
					deferred_indexed_thread__next(*thread, time, offset) : 0;
				return 0;
			}
		}
		ret = dc->index_scan(dc);
		if (ret < 0)
			return ret;
	}
}

/* With the index: the sample's record is known, or will never come. */
static int deferred_callchains__sample_indexed(struct deferred_callchains *dc,
					       union perf_event *event,
					       struct perf_sample *sample,
					       union perf_event *copy, u64 file_offset,
					       const char *file_path)
{
	/* without time, the order of the file is all there is */
	u64 time = dc->index_in_file_order ? file_offset : sample->time;
	unsigned int flags = DEFERRED_CALLCHAIN__UNRESOLVED;
	struct deferred_indexed_thread *thread = NULL;
	struct deferred_indexed *indexed = NULL;
	const union perf_event *record = NULL;
	u64 cookie = sample->deferred_cookie;
	bool gave_up = false;
	size_t next = 0;
	int err = 0;

	if (sample->tid != (u32)-1)
		err = deferred_callchains__index_until(dc, sample->tid, time, file_offset,
						       &thread, &next, &gave_up);
	if (err) {
		free(copy);
		return err;
	}
	if (thread) {
		struct deferred_indexed *before = next ? &thread->events[next - 1] : NULL;
		struct deferred_indexed *after = next < thread->nr ? &thread->events[next] : NULL;

		if (before && before->record &&
		    before->record->callchain_deferred.cookie == cookie) {
			indexed = before;
			flags = DEFERRED_CALLCHAIN__JOINED | DEFERRED_CALLCHAIN__BACKWARD;
		} else if (after && after->record &&
			   after->record->callchain_deferred.cookie == cookie) {
			indexed = after;
			flags = DEFERRED_CALLCHAIN__JOINED;
		}
	}
	if (indexed) {
		u64 from = min(time, indexed->time), to = max(time, indexed->time);

		if (dc->nr_lost_times &&
		    deferred_callchains__lost_before(dc, to) !=
		    deferred_callchains__lost_before(dc, from))
			flags |= DEFERRED_CALLCHAIN__AMBIGUOUS;
		if (!indexed->used)
			dc->index_used++;
		indexed->used = true;
		record = indexed->record;
	}
	deferred_callchains__count(dc, flags);
	if (gave_up && !indexed)
		dc->stats.capped++;
	free(copy);
	err = dc->deliver(dc, event, sample, record, flags, file_offset, file_path);
	/* the thread's samples to come are not before this one: the rest is done */
	if (thread && next > 1)
		deferred_indexed_thread__retire(dc, thread, next - 1);
	return err;
}

/*
 * Every event read moves the watermark: the index frees what falls behind
 * it when it has grown enough since the last time.
 */
static void deferred_callchains__index_read(struct deferred_callchains *dc,
					    const struct perf_sample *sample, u64 file_offset)
{
	u64 time = dc->index_in_file_order ? file_offset : sample->time;

	if (time != (u64)-1 && time > dc->index_watermark)
		dc->index_watermark = time;
	if (dc->index_bytes >= dc->index_sweep_bytes)
		deferred_callchains__index_sweep(dc);
}

void deferred_callchains__index_free(struct deferred_callchains *dc)
{
	struct hashmap_entry *entry;
	size_t bkt;

	if (dc->index) {
		hashmap__for_each_entry(dc->index, entry, bkt) {
			struct deferred_indexed_thread *thread = entry->pvalue;

			for (size_t i = 0; i < thread->nr; i++)
				free(thread->events[i].record);
			free(thread->events);
			free(thread);
		}
		hashmap__free(dc->index);
		dc->index = NULL;
	}
	zfree(&dc->lost_times);
	dc->nr_lost_times = 0;
	dc->lost_times_size = 0;
	dc->index_scan = NULL;
	dc->index_in_file_order = false;
	dc->index_bytes = 0;
}

static int deferred_callchains__sample(struct deferred_callchains *dc,
				       union perf_event *event, struct perf_sample *sample,
				       union perf_event *copy, u64 file_offset,
				       const char *file_path)
{
	u64 cookie = sample->deferred_cookie;
	struct deferred_thread *thread;
	unsigned int flags;

	dc->stats.deferred++;

	if (dc->index)
		return deferred_callchains__sample_indexed(dc, event, sample, copy,
							   file_offset, file_path);

	/* Without a tid on both sides, no record can ever be this sample's. */
	if (sample->tid == (u32)-1 || dc->records_have_no_tid) {
		flags = deferred_callchains__count(dc, DEFERRED_CALLCHAIN__UNRESOLVED);
		return deferred_callchains__pass(dc, event, sample, copy, NULL, flags, cookie,
						 file_offset, file_path, NULL);
	}

	thread = deferred_thread__findnew(dc, sample->tid);
	if (!thread) {
		free(copy);
		return -ENOMEM;
	}

	if (thread->last_record &&
	    thread->last_record->event.callchain_deferred.cookie == cookie) {
		flags = DEFERRED_CALLCHAIN__JOINED | DEFERRED_CALLCHAIN__BACKWARD;
		if (thread->last_record_lost_generation != dc->lost_generation)
			flags |= DEFERRED_CALLCHAIN__AMBIGUOUS;
		thread->last_record_served = true;
		flags = deferred_callchains__count(dc, flags);
		return deferred_callchains__pass(dc, event, sample, copy, thread->last_record,
						 flags, cookie, file_offset, file_path, NULL);
	}

	return deferred_callchains__pass(dc, event, sample, copy, NULL, /*flags=*/0, cookie,
					 file_offset, file_path, thread);
}

static int deferred_callchains__record(struct deferred_callchains *dc,
				       union perf_event *event, struct perf_sample *sample,
				       union perf_event *copy, u64 file_offset,
				       const char *file_path)
{
	u64 cookie = event->callchain_deferred.cookie;
	struct deferred_record *record;
	struct deferred_thread *thread;
	struct deferred_event *held;
	bool served = false;
	int err;

	/* a zero cookie or no sample_id: nothing can join it */
	if (!cookie || sample->tid == (u32)-1) {
		dc->stats.malformed++;
		goto pass;
	}

	dc->stats.records++;
	/* indexed: the samples found it already, or will */
	if (dc->index)
		goto pass;
	thread = deferred_thread__findnew(dc, sample->tid);
	record = deferred_record__new(event);
	if (!thread || !record) {
		deferred_record__put(record);
		free(copy);
		return -ENOMEM;
	}

	list_for_each_entry(held, &thread->waiting, waiting) {
		if (held->cookie == cookie) {
			served = true;
			break;
		}
	}
	deferred_thread__resolve(dc, thread, record);
	deferred_thread__forget_record(dc, thread);
	thread->last_record = record;
	thread->last_record_served = served;
	thread->last_record_lost_generation = dc->lost_generation;
pass:
	err = deferred_callchains__pass(dc, event, sample, copy, NULL, 0, 0,
					file_offset, file_path, NULL);
	return err ?: deferred_callchains__drain(dc);
}

static void deferred_thread__end(struct deferred_callchains *dc,
				 struct deferred_thread *thread)
{
	deferred_thread__resolve(dc, thread, NULL);
	deferred_thread__forget_record(dc, thread);
	free(thread);
}

static void deferred_callchains__thread_exit(struct deferred_callchains *dc, u32 tid)
{
	struct deferred_thread *thread;

	if (hashmap__delete(dc->threads, tid, NULL, &thread))
		deferred_thread__end(dc, thread);
}

bool deferred_callchain__lost_records(const union perf_event *event,
				      const struct perf_sample *sample)
{
	if (event->header.type == PERF_RECORD_LOST)
		return true;
	/*
	 * Samples a BPF filter dropped on purpose, or perf record's totals at
	 * the end (no time), say nothing of where records went missing.
	 */
	return event->header.type == PERF_RECORD_LOST_SAMPLES &&
	       !(event->header.misc & PERF_RECORD_MISC_LOST_SAMPLES_BPF) &&
	       sample->time && sample->time != (u64)-1;
}

int deferred_callchains__event(struct deferred_callchains *dc,
			       union perf_event *event, struct perf_sample *sample,
			       union perf_event *copy, u64 file_offset,
			       const char *file_path)
{
	int err;

	if (dc->index)
		deferred_callchains__index_read(dc, sample, file_offset);

	switch (event->header.type) {
	case PERF_RECORD_SAMPLE:
		if (sample->deferred_cookie)
			return deferred_callchains__sample(dc, event, sample, copy,
							   file_offset, file_path);
		break;
	case PERF_RECORD_CALLCHAIN_DEFERRED:
		return deferred_callchains__record(dc, event, sample, copy,
						   file_offset, file_path);
	case PERF_RECORD_EXIT:
		/* the thread's waiting samples go out before its exit */
		if (!dc->index)
			deferred_callchains__thread_exit(dc, event->fork.tid);
		err = deferred_callchains__pass(dc, event, sample, copy, NULL, 0, 0,
						file_offset, file_path, NULL);
		return err ?: deferred_callchains__drain(dc);
	case PERF_RECORD_LOST:
	case PERF_RECORD_LOST_SAMPLES:
		if (event->header.type == PERF_RECORD_LOST)
			dc->stats.lost += event->lost.lost;
		if (deferred_callchain__lost_records(event, sample))
			dc->lost_generation++;
		break;
	default:
		break;
	}
	return deferred_callchains__pass(dc, event, sample, copy, NULL, 0, 0,
					 file_offset, file_path, NULL);
}

int deferred_callchains__flush(struct deferred_callchains *dc)
{
	struct hashmap_entry *entry, *tmp;
	size_t bkt;

	if (!dc->threads)
		return 0;

	/* the records read that no sample used, whether indexed or not */
	if (dc->index) {
		pr_debug("deferred callchains: the index of records held at most %" PRIu64
			 " bytes\n", dc->index_peak_bytes);
		/* the index's own walk over the data against the reader's */
		if (dc->index_horizon == DEFERRED_INDEX__END)
			pr_debug("deferred callchains: %" PRIu64 " records indexed, %" PRIu64
				 " read\n", dc->index_records, dc->stats.records);
		if (dc->stats.records > dc->index_used)
			dc->stats.orphans += dc->stats.records - dc->index_used;
		deferred_callchains__index_free(dc);
	}

	hashmap__for_each_entry_safe(dc->threads, entry, tmp, bkt) {
		struct deferred_thread *thread = entry->pvalue;

		/* frees the entry */
		hashmap__delete(dc->threads, entry->key, NULL, NULL);
		deferred_thread__end(dc, thread);
	}
	return deferred_callchains__drain(dc);
}

void deferred_callchains__exit(struct deferred_callchains *dc)
{
	struct deferred_event *held, *tmp;
	struct hashmap_entry *entry;
	size_t bkt;

	deferred_callchains__index_free(dc);
	zfree(&dc->chain);
	dc->chain_size = 0;
	if (!dc->threads)
		return;

	list_for_each_entry_safe(held, tmp, &dc->queue, node)
		deferred_event__free(held);
	hashmap__for_each_entry(dc->threads, entry, bkt) {
		struct deferred_thread *thread = entry->pvalue;

		deferred_record__put(thread->last_record);
		free(thread);
	}
	hashmap__free(dc->threads);
	dc->threads = NULL;
}

bool evlist__has_deferred_callchains(struct evlist *evlist)
{
	struct evsel *evsel;

	evlist__for_each_entry(evlist, evsel) {
		if ((evsel->core.attr.sample_type & PERF_SAMPLE_CALLCHAIN_DEFERRED) ||
		    perf_event_attr__defer_callchain(&evsel->core.attr))
			return true;
	}
	return false;
}

u64 callchain__deferred_cookie(const struct ip_callchain *chain)
{
	if (!chain || chain->nr < 2 ||
	    chain->ips[chain->nr - 2] != DEFERRED_CALLCHAIN__CONTEXT_USER_DEFERRED)
		return 0;
	return chain->ips[chain->nr - 1];
}

/* The sample's kernel part: a 6.19 sample's marker and cookie are no frames. */
static u64 deferred_callchain__kernel_nr(const struct ip_callchain *kernel)
{
	if (!kernel)
		return 0;
	return callchain__deferred_cookie(kernel) ? kernel->nr - 2 : kernel->nr;
}

/* The record's user stack: a 6.19 record begins it with its context marker. */
static const __u64 *deferred_record__user_ips(const union perf_event *record, u64 *nr)
{
	const __u64 *ips = record->callchain_deferred.ips;

	*nr = record->callchain_deferred.nr;
	if (*nr && ips[0] == PERF_CONTEXT_USER) {
		ips++;
		(*nr)--;
	}
	return ips;
}

static u64 deferred_callchain__joined_nr(const struct ip_callchain *kernel,
					 const union perf_event *record)
{
	u64 nr_user = 0;

	if (record)
		deferred_record__user_ips(record, &nr_user);
	return deferred_callchain__kernel_nr(kernel) + (nr_user ? 1 + nr_user : 0);
}

static void deferred_callchain__join_to(struct ip_callchain *chain,
					const struct ip_callchain *kernel,
					const union perf_event *record)
{
	u64 nr_kernel = deferred_callchain__kernel_nr(kernel);
	const __u64 *user = NULL;
	u64 nr_user = 0;

	if (record)
		user = deferred_record__user_ips(record, &nr_user);
	chain->nr = deferred_callchain__joined_nr(kernel, record);
	if (nr_kernel)
		memcpy(chain->ips, kernel->ips, nr_kernel * sizeof(u64));
	if (nr_user) {
		/* as an fp sample carries it: the user part after its marker */
		chain->ips[nr_kernel] = PERF_CONTEXT_USER;
		memcpy(&chain->ips[nr_kernel + 1], user, nr_user * sizeof(u64));
	}
}

struct ip_callchain *deferred_callchain__join(const struct ip_callchain *kernel,
					      const union perf_event *record)
{
	u64 nr = deferred_callchain__joined_nr(kernel, record);
	struct ip_callchain *chain = malloc(sizeof(*chain) + nr * sizeof(u64));

	if (chain)
		deferred_callchain__join_to(chain, kernel, record);
	return chain;
}

struct ip_callchain *deferred_callchains__join(struct deferred_callchains *dc,
					       const struct ip_callchain *kernel,
					       const union perf_event *record)
{
	u64 nr = deferred_callchain__joined_nr(kernel, record);

	if (nr > dc->chain_size) {
		struct ip_callchain *chain = realloc(dc->chain,
						     sizeof(*chain) + nr * sizeof(u64));

		if (!chain)
			return NULL;
		dc->chain = chain;
		dc->chain_size = nr;
	}
	deferred_callchain__join_to(dc->chain, kernel, record);
	return dc->chain;
}

/*
 * A sample whose user part is missing or may be another stay's shows it in
 * every callchain view (perf report, perf script, flame graphs, scripts):
 * one frame, outermost, named after what happened. The frame is a real
 * symbol in a map of its own, as every printer and sort key expects of a
 * frame: one dso per mark, so that the two never merge with each other or
 * with a real frame, whatever the sort keys. The dsos have no file: nothing
 * tries to read symbols, source lines or code from them.
 */
struct deferred_mark {
	const char	*name;
	struct map	*map;
};

/* In the order of their mappings, DEFERRED_CALLCHAIN__MARK_SIZE apart */
static struct deferred_mark deferred_marks[] = {
	{ .name = "[user stack unresolved]", },
	{ .name = "[user stack ambiguous]", },
};

static struct deferred_mark *deferred_mark__of_name(const char *name)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(deferred_marks); i++) {
		if (!strcmp(deferred_marks[i].name, name))
			return &deferred_marks[i];
	}
	return NULL;
}

static u64 deferred_mark__start(const struct deferred_mark *mark)
{
	return DEFERRED_CALLCHAIN__MARK_START +
	       (mark - deferred_marks) * DEFERRED_CALLCHAIN__MARK_SIZE;
}

void deferred_callchain__mark_dso(struct dso *dso)
{
	struct deferred_mark *mark = deferred_mark__of_name(dso__long_name(dso));
	struct symbol *sym;

	if (!mark || dso__loaded(dso))
		return;
	/* nothing to read: one symbol over the whole mapping */
	dso__set_binary_type(dso, DSO_BINARY_TYPE__NOT_FOUND);
	dso__set_has_srcline(dso, false);
	sym = symbol__new(0, DEFERRED_CALLCHAIN__MARK_SIZE, STB_GLOBAL, STT_FUNC, mark->name);
	if (sym)
		dso__insert_symbol(dso, sym);
	dso__set_loaded(dso);
}

static struct map *deferred_mark__map(struct deferred_mark *mark)
{
	struct dso *dso;

	if (mark->map)
		return mark->map;

	dso = dso__new(mark->name);
	if (!dso)
		return NULL;
	deferred_callchain__mark_dso(dso);
	mark->map = map__new2(deferred_mark__start(mark), dso);
	if (mark->map)
		map__set_end(mark->map, deferred_mark__start(mark) +
			     DEFERRED_CALLCHAIN__MARK_SIZE);
	/* the map holds the dso, and the mark holds the map until the end */
	dso__put(dso);
	return mark->map;
}

static struct deferred_mark *deferred_mark__find(const struct perf_sample *sample)
{
	if (sample->deferred_flags & DEFERRED_CALLCHAIN__UNRESOLVED)
		return &deferred_marks[0];
	if (sample->deferred_flags & DEFERRED_CALLCHAIN__AMBIGUOUS)
		return &deferred_marks[1];
	return NULL;
}

const char *deferred_callchain__mark_of(const struct map *map)
{
	struct deferred_mark *mark;

	if (!map)
		return NULL;
	/* this session's own, or the mapping of a merged file's mark */
	mark = deferred_mark__of_name(dso__long_name(map__dso(map)));
	if (!mark || map__start(map) != deferred_mark__start(mark))
		return NULL;
	return mark->name;
}

const char *deferred_callchain__mark(const struct perf_sample *sample)
{
	struct deferred_mark *mark = deferred_mark__find(sample);

	return mark ? mark->name : NULL;
}

u64 deferred_callchain__mark_ip(const struct perf_sample *sample)
{
	struct deferred_mark *mark = deferred_mark__find(sample);

	return mark ? deferred_mark__start(mark) : 0;
}

int callchain_cursor__append_deferred_mark(struct callchain_cursor *cursor,
					   struct thread *thread,
					   const struct perf_sample *sample)
{
	struct map_symbol ms = { .maps = thread__maps(thread), };
	struct deferred_mark *mark = deferred_mark__find(sample);

	if (!mark)
		return 0;

	ms.map = deferred_mark__map(mark);
	if (!ms.map)
		return -ENOMEM;
	ms.sym = dso__first_symbol(map__dso(ms.map));
	return callchain_cursor_append(cursor, map__start(ms.map), &ms, false, NULL, 0, 0, 0,
				       NULL);
}

size_t deferred_callchain_stats__fprintf(const struct deferred_callchain_stats *stats,
					 FILE *fp, const char *prefix)
{
	static const struct {
		const char *name;
		size_t offset;
	} counts[] = {
#define COUNT(field, name) { name, offsetof(struct deferred_callchain_stats, field) }
		COUNT(deferred,   "deferred samples"),
		COUNT(joined,     "joined"),
		COUNT(backward,   "  backward joins"),
		COUNT(ambiguous,  "  ambiguous joins"),
		COUNT(unresolved, "unresolved samples"),
		COUNT(capped,     "  over memory cap"),
		COUNT(records,    "records"),
		COUNT(orphans,    "orphan records"),
		COUNT(malformed,  "malformed records"),
		COUNT(lost,       "lost records"),
#undef COUNT
	};
	size_t ret = fprintf(fp, "%sdeferred callchains:\n", prefix);

	for (size_t i = 0; i < ARRAY_SIZE(counts); i++) {
		const u64 *count = (const void *)stats + counts[i].offset;

		ret += fprintf(fp, "%s%20s: %10" PRIu64 "\n", prefix,
			       counts[i].name, *count);
	}
	return ret;
}
