// SPDX-License-Identifier: GPL-2.0
/*
 * Joins the samples of events with PERF_SAMPLE_CALLCHAIN_DEFERRED with the
 * PERF_RECORD_CALLCHAIN_DEFERRED that carries their user stack.
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
 * Each sample and each record costs one hash lookup on the tid; only what
 * waits is kept, plus one record per thread until the thread exits.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/list.h>
#include <linux/string.h>
#include <linux/zalloc.h>
#include <perf/event.h>

#include "callchain.h"
#include "deferred-callchain.h"
#include "event.h"
#include "hashmap.h"
#include "map_symbol.h"
#include "sample.h"
#include "symbol.h"

struct deferred_sample {
	struct list_head	node;
	u64			lost_generation;
	u64			file_offset;
	const char		*file_path;
	/* a copy: the reader reuses the memory of the events it hands out */
	union perf_event	*event;
	/* parsed from the original, pointing into the copy */
	struct perf_sample	sample;
};

struct deferred_thread {
	struct list_head	waiting;
	union perf_event	*last_record;
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
	dc->deliver = deliver;
	dc->priv = priv;
	return 0;
}

static union perf_event *event__dup(const union perf_event *event)
{
	return memdup(event, event->header.size);
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
	zfree(&thread->last_record);
}

static int deliver_waiting(struct deferred_callchains *dc, struct deferred_sample *sample,
			   const union perf_event *record, unsigned int flags)
{
	int err;

	if (flags & DEFERRED_CALLCHAIN__UNRESOLVED) {
		dc->stats.unresolved++;
	} else {
		dc->stats.joined++;
		if (flags & DEFERRED_CALLCHAIN__BACKWARD)
			dc->stats.backward++;
		if (flags & DEFERRED_CALLCHAIN__AMBIGUOUS)
			dc->stats.ambiguous++;
	}
	err = dc->deliver(dc, sample->event, &sample->sample, record, flags,
			  sample->file_offset, sample->file_path);
	list_del_init(&sample->node);
	dc->nr_waiting--;
	free(sample->event);
	free(sample);
	return err;
}

/* Delivers the thread's waiting samples: joined with @record, or unresolved. */
static int deferred_thread__resolve(struct deferred_callchains *dc,
				    struct deferred_thread *thread,
				    const union perf_event *record)
{
	struct deferred_sample *sample, *tmp;
	int err = 0;

	list_for_each_entry_safe(sample, tmp, &thread->waiting, node) {
		unsigned int flags = DEFERRED_CALLCHAIN__UNRESOLVED;
		const union perf_event *joined = NULL;
		int ret;

		if (record && record->callchain_deferred.cookie == sample->sample.deferred_cookie) {
			flags = DEFERRED_CALLCHAIN__JOINED;
			if (sample->lost_generation != dc->lost_generation)
				flags |= DEFERRED_CALLCHAIN__AMBIGUOUS;
			joined = record;
		}
		ret = deliver_waiting(dc, sample, joined, flags);
		if (ret && !err)
			err = ret;
	}
	return err;
}

/* A pointer into @from's bytes, moved to the same place in @to. */
static void *rebase(void *ptr, const union perf_event *from, union perf_event *to)
{
	const char *start = (const char *)from;
	const char *p = ptr;

	if (p < start || p >= start + from->header.size)
		return ptr;
	return (char *)to + (p - start);
}

/*
 * The parsed sample points into its event: make it point into the copy.
 * A group read's values share their place with a single read's id.
 */
static void sample__rebase(struct perf_sample *sample, const union perf_event *from,
			   union perf_event *to, u64 read_format)
{
	sample->raw_data = rebase(sample->raw_data, from, to);
	sample->callchain = rebase(sample->callchain, from, to);
	sample->branch_stack = rebase(sample->branch_stack, from, to);
	sample->branch_stack_cntr = rebase(sample->branch_stack_cntr, from, to);
	sample->user_regs.regs = rebase(sample->user_regs.regs, from, to);
	sample->intr_regs.regs = rebase(sample->intr_regs.regs, from, to);
	sample->user_stack.data = rebase(sample->user_stack.data, from, to);
	sample->aux_sample.data = rebase(sample->aux_sample.data, from, to);
	if (read_format & PERF_FORMAT_GROUP)
		sample->read.group.values = rebase(sample->read.group.values, from, to);
}

int deferred_callchains__sample(struct deferred_callchains *dc,
				union perf_event *event, struct perf_sample *parsed,
				u64 read_format, u64 file_offset, const char *file_path)
{
	struct deferred_thread *thread = deferred_thread__findnew(dc, parsed->tid);
	u64 cookie = parsed->deferred_cookie;
	struct deferred_sample *sample;

	if (!thread)
		return -ENOMEM;

	dc->stats.deferred++;

	if (thread->last_record &&
	    thread->last_record->callchain_deferred.cookie == cookie) {
		unsigned int flags = DEFERRED_CALLCHAIN__JOINED | DEFERRED_CALLCHAIN__BACKWARD;

		if (thread->last_record_lost_generation != dc->lost_generation)
			flags |= DEFERRED_CALLCHAIN__AMBIGUOUS;
		thread->last_record_served = true;
		dc->stats.joined++;
		dc->stats.backward++;
		if (flags & DEFERRED_CALLCHAIN__AMBIGUOUS)
			dc->stats.ambiguous++;
		return dc->deliver(dc, event, parsed, thread->last_record, flags,
				   file_offset, file_path);
	}

	sample = zalloc(sizeof(*sample));
	if (!sample)
		return -ENOMEM;
	sample->event = event__dup(event);
	if (!sample->event) {
		free(sample);
		return -ENOMEM;
	}
	sample->sample = *parsed;
	sample__rebase(&sample->sample, event, sample->event, read_format);
	sample->lost_generation = dc->lost_generation;
	sample->file_offset = file_offset;
	sample->file_path = file_path;
	list_add_tail(&sample->node, &thread->waiting);
	dc->nr_waiting++;
	return 0;
}

int deferred_callchains__record(struct deferred_callchains *dc,
				const union perf_event *record, u32 tid)
{
	struct deferred_thread *thread = deferred_thread__findnew(dc, tid);
	union perf_event *copy;
	bool served = false;
	struct deferred_sample *sample;
	int err;

	if (!thread)
		return -ENOMEM;

	dc->stats.records++;

	list_for_each_entry(sample, &thread->waiting, node) {
		if (sample->sample.deferred_cookie == record->callchain_deferred.cookie) {
			served = true;
			break;
		}
	}

	copy = event__dup(record);
	err = deferred_thread__resolve(dc, thread, record);

	deferred_thread__forget_record(dc, thread);
	if (!copy) {
		/* Without a copy, later samples of this stay go unresolved. */
		if (!served)
			dc->stats.orphans++;
		return err ?: -ENOMEM;
	}
	thread->last_record = copy;
	thread->last_record_served = served;
	thread->last_record_lost_generation = dc->lost_generation;
	return err;
}

void deferred_callchains__lost(struct deferred_callchains *dc, u64 nr_lost)
{
	dc->lost_generation++;
	dc->stats.lost += nr_lost;
}

static int deferred_thread__end(struct deferred_callchains *dc,
				struct deferred_thread *thread)
{
	int err = deferred_thread__resolve(dc, thread, NULL);

	deferred_thread__forget_record(dc, thread);
	free(thread);
	return err;
}

int deferred_callchains__thread_exit(struct deferred_callchains *dc, u32 tid)
{
	struct deferred_thread *thread;

	if (!hashmap__delete(dc->threads, tid, NULL, &thread))
		return 0;
	return deferred_thread__end(dc, thread);
}

int deferred_callchains__flush(struct deferred_callchains *dc)
{
	struct hashmap_entry *entry, *tmp;
	size_t bkt;
	int err = 0;

	if (!dc->threads)
		return 0;

	hashmap__for_each_entry_safe(dc->threads, entry, tmp, bkt) {
		struct deferred_thread *thread = entry->pvalue;
		int ret;

		hashmap__delete(dc->threads, entry->key, NULL, NULL);
		ret = deferred_thread__end(dc, thread);
		if (ret && !err)
			err = ret;
	}
	return err;
}

static void deferred_thread__free(struct deferred_thread *thread)
{
	struct deferred_sample *sample, *tmp;

	list_for_each_entry_safe(sample, tmp, &thread->waiting, node) {
		free(sample->sample.read_periods);
		free(sample->event);
		free(sample);
	}
	free(thread->last_record);
	free(thread);
}

void deferred_callchains__exit(struct deferred_callchains *dc)
{
	struct hashmap_entry *entry;
	size_t bkt;

	if (!dc->threads)
		return;

	hashmap__for_each_entry(dc->threads, entry, bkt)
		deferred_thread__free(entry->pvalue);
	hashmap__free(dc->threads);
	dc->threads = NULL;
}

struct ip_callchain *deferred_callchain__join(const struct ip_callchain *kernel,
					      const union perf_event *record)
{
	u64 nr_kernel = kernel ? kernel->nr : 0;
	u64 nr_user = record->callchain_deferred.nr;
	u64 nr = nr_kernel + (nr_user ? 1 + nr_user : 0);
	struct ip_callchain *chain = malloc(sizeof(*chain) + nr * sizeof(u64));

	if (!chain)
		return NULL;

	chain->nr = nr;
	if (nr_kernel)
		memcpy(chain->ips, kernel->ips, nr_kernel * sizeof(u64));
	if (nr_user) {
		/* as an fp sample carries it: the user part after its marker */
		chain->ips[nr_kernel] = PERF_CONTEXT_USER;
		memcpy(&chain->ips[nr_kernel + 1], record->callchain_deferred.ips,
		       nr_user * sizeof(u64));
	}
	return chain;
}

/*
 * A sample whose user part is missing or may be another stay's shows it in
 * every callchain view (perf report, perf script, flame graphs...): one
 * frame, outermost, named after what happened.
 */
int callchain_cursor__append_deferred_mark(struct callchain_cursor *cursor,
					   const struct perf_sample *sample)
{
	static struct symbol *unresolved, *ambiguous;
	struct map_symbol ms = { .sym = NULL, };
	struct symbol **mark;
	const char *name;

	if (sample->deferred_flags & DEFERRED_CALLCHAIN__UNRESOLVED) {
		mark = &unresolved;
		name = "[user stack unresolved]";
	} else if (sample->deferred_flags & DEFERRED_CALLCHAIN__AMBIGUOUS) {
		mark = &ambiguous;
		name = "[user stack ambiguous]";
	} else {
		return 0;
	}

	if (!*mark) {
		*mark = symbol__new(0, 0, STB_GLOBAL, STT_FUNC, name);
		if (!*mark)
			return -ENOMEM;
	}
	ms.sym = *mark;
	return callchain_cursor_append(cursor, 0, &ms, false, NULL, 0, 0, 0, NULL);
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
