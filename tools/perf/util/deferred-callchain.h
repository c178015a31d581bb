/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __PERF_DEFERRED_CALLCHAIN_H
#define __PERF_DEFERRED_CALLCHAIN_H

#include <stdio.h>
#include <linux/bits.h>
#include <linux/types.h>

union perf_event;
struct callchain_cursor;
struct hashmap;
struct ip_callchain;
struct perf_sample;

/*
 * Samples of events with PERF_SAMPLE_CALLCHAIN_DEFERRED carry the kernel
 * part of their callchain and a cookie; the user part comes later in a
 * PERF_RECORD_CALLCHAIN_DEFERRED with the same cookie and tid, written when
 * the task returned to user space. The session joins the two, in time
 * order, so that tools see ordinary callchains: struct perf_sample's
 * deferred_flags then says how the sample was delivered.
 */
#define DEFERRED_CALLCHAIN__JOINED	BIT(0) /* user part from its record */
#define DEFERRED_CALLCHAIN__BACKWARD	BIT(1) /* the record came first */
#define DEFERRED_CALLCHAIN__AMBIGUOUS	BIT(2) /* records were lost in between */
#define DEFERRED_CALLCHAIN__UNRESOLVED	BIT(3) /* no record: kernel part only */

struct deferred_callchain_stats {
	u64 deferred;	/* samples that arrived with a cookie */
	u64 joined;	/* delivered with the user part of their record */
	u64 backward;	/* joins with a record that came before the sample */
	u64 ambiguous;	/* joins across lost records */
	u64 unresolved;	/* delivered with the kernel part only */
	u64 records;	/* records read */
	u64 orphans;	/* records no sample waited for */
	u64 malformed;	/* records skipped: nr too large, zero cookie, no tid */
	u64 lost;	/* records of any kind the kernel could not write */
};

struct deferred_callchains;

/*
 * Delivers a sample the join is done with: @sample, parsed from @event
 * (once: parsing byte-swaps some fields in place), is the callee's to
 * change. @record is the record joined with it, NULL when the sample is
 * unresolved; @flags is a mask of DEFERRED_CALLCHAIN__*. Both are only
 * valid during the call.
 */
typedef int (*deferred_callchain_deliver_fn)(struct deferred_callchains *dc,
					     union perf_event *event,
					     struct perf_sample *sample,
					     const union perf_event *record,
					     unsigned int flags,
					     u64 file_offset,
					     const char *file_path);

struct deferred_callchains {
	/* tid -> struct deferred_thread, for threads with something to keep */
	struct hashmap			*threads;
	/* bumped by every lost-record report: joins across it are ambiguous */
	u64				lost_generation;
	/* samples waiting for their record */
	u64				nr_waiting;
	struct deferred_callchain_stats	stats;
	deferred_callchain_deliver_fn	deliver;
	void				*priv;
};

int deferred_callchains__init(struct deferred_callchains *dc,
			      deferred_callchain_deliver_fn deliver, void *priv);
void deferred_callchains__exit(struct deferred_callchains *dc);

int deferred_callchains__sample(struct deferred_callchains *dc,
				union perf_event *event, struct perf_sample *sample,
				u64 read_format, u64 file_offset, const char *file_path);
int deferred_callchains__record(struct deferred_callchains *dc,
				const union perf_event *record, u32 tid);
void deferred_callchains__lost(struct deferred_callchains *dc, u64 nr_lost);
int deferred_callchains__thread_exit(struct deferred_callchains *dc, u32 tid);
int deferred_callchains__flush(struct deferred_callchains *dc);

struct ip_callchain *deferred_callchain__join(const struct ip_callchain *kernel,
					      const union perf_event *record);

int callchain_cursor__append_deferred_mark(struct callchain_cursor *cursor,
					   const struct perf_sample *sample);

size_t deferred_callchain_stats__fprintf(const struct deferred_callchain_stats *stats,
					 FILE *fp, const char *prefix);

#endif /* __PERF_DEFERRED_CALLCHAIN_H */
