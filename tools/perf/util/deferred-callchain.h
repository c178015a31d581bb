/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __PERF_DEFERRED_CALLCHAIN_H
#define __PERF_DEFERRED_CALLCHAIN_H

#include <stdio.h>
#include <linux/bits.h>
#include <linux/list.h>
#include <linux/perf_event.h>
#include <linux/types.h>

union perf_event;
struct callchain_cursor;
struct hashmap;
struct ip_callchain;
struct perf_sample;
struct thread;

/*
 * Samples of events with PERF_SAMPLE_CALLCHAIN_DEFERRED carry the kernel
 * part of their callchain and a cookie; the user part comes later in a
 * PERF_RECORD_CALLCHAIN_DEFERRED with the same cookie and tid, written when
 * the task returned to user space. The session joins the two, in time
 * order, so that tools see ordinary callchains: struct perf_sample's
 * deferred_flags then says how the sample was delivered.
 */
/*
 * Linux 6.19 and later defer user callchains their own way, and a perf.data
 * file recorded there is read here too: its events ask with
 * attr.defer_callchain (sampling events) and attr.defer_output (the events
 * that get the records), the first two bits of what this kernel's
 * perf_event_attr calls __reserved_1; a deferred sample's callchain ends in
 * the context marker below followed by the cookie, instead of a cookie
 * after the AUX data; and the record (type 22 as here, the same layout)
 * carries PERF_CONTEXT_USER before its ips. The session turns both into
 * this format's terms: the join, its rules and its views are the same.
 */
#define DEFERRED_CALLCHAIN__CONTEXT_USER_DEFERRED	((u64)-640)

static inline bool perf_event_attr__defer_callchain(const struct perf_event_attr *attr)
{
	return attr->__reserved_1 & BIT(0);
}

static inline bool perf_event_attr__defer_output(const struct perf_event_attr *attr)
{
	return attr->__reserved_1 & BIT(1);
}

/* After perf inject --merge-callchains: nothing deferred is left */
static inline void perf_event_attr__clear_defer(struct perf_event_attr *attr)
{
	attr->__reserved_1 &= ~(BIT(0) | BIT(1));
}

/* The cookie a 6.19 sample's callchain ends with, or 0 */
u64 callchain__deferred_cookie(const struct ip_callchain *chain);

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
	u64 capped;	/* of those: given up on past the queue's memory cap */
	u64 records;	/* records read */
	u64 orphans;	/* records no sample waited for */
	u64 malformed;	/* records skipped: nr too large, zero cookie, no tid */
	u64 lost;	/* records of any kind the kernel could not write */
};

struct deferred_callchains;

/*
 * Indexes more of a file: calls deferred_callchains__index_record(),
 * _exit() and _lost() for what it finds, and _horizon() as it learns that
 * nothing earlier is left; deferred_callchains__index_done() and returns 0
 * at the end of the data, else 1, or an error.
 */
typedef int (*deferred_index_scan_fn)(struct deferred_callchains *dc);

/*
 * Hands an event to the tool, in time order. @sample is parsed from @event,
 * or NULL when @event is a copy the join held: then the callee parses it.
 * For a sample with a cookie, @flags is a mask of DEFERRED_CALLCHAIN__* and
 * @record the record joined with it (NULL when unresolved); both are 0 and
 * NULL for every other event. Everything is only valid during the call.
 */
typedef int (*deferred_callchain_deliver_fn)(struct deferred_callchains *dc,
					     union perf_event *event,
					     struct perf_sample *sample,
					     const union perf_event *record,
					     unsigned int flags,
					     u64 file_offset,
					     const char *file_path);

/* The default cap on what waiting samples hold: events queued, or records indexed */
#define DEFERRED_CALLCHAIN__QUEUE_SIZE	(256ULL << 20)

/* call-graph.defer-queue-size and the tools' --defer-queue-size */
extern u64 deferred_callchain_queue_size;

/* A size in bytes, with an optional k, m or g: 0, or -1 on a bad one */
int deferred_callchain__parse_queue_size(const char *str);

struct option;
/* --defer-queue-size's callback; --no-defer-queue-size is the default */
int deferred_callchain__queue_size_opt(const struct option *opt, const char *str, int unset);

#define DEFER_QUEUE_SIZE_HELP	\
	"memory for what samples waiting for their deferred callchain hold (256M)"
#define OPT_DEFER_QUEUE_SIZE()							\
	OPT_CALLBACK(0, "defer-queue-size", NULL, "size", DEFER_QUEUE_SIZE_HELP,	\
		     deferred_callchain__queue_size_opt)

struct deferred_callchains {
	/* tid -> struct deferred_thread, for threads with something to keep */
	struct hashmap			*threads;
	/*
	 * Events held behind the oldest waiting sample, in time order: a
	 * sample waits for its record, and what came after it waits for it.
	 */
	struct list_head		queue;
	u64				queued_bytes;
	u64				max_queued_bytes;
	/* bumped by every lost-record report: joins across it are ambiguous */
	u64				lost_generation;
	/* samples waiting for their record */
	u64				nr_waiting;
	/* no sample_id_all: records have no tid, so nothing can be joined */
	bool				records_have_no_tid;
	/*
	 * A file's records and exits, indexed ahead of the reader as far as
	 * its samples need: tid -> struct deferred_indexed_thread, and the
	 * times of its losses, sorted. With it, a sample is joined (or not)
	 * the moment it comes, by the rules the queue applies: nothing waits,
	 * and what is indexed is freed once no later sample can use it.
	 */
	struct hashmap			*index;
	/* indexes more of the file; NULL once all of it is */
	deferred_index_scan_fn		index_scan;
	/* every event not yet indexed has a time at or after this */
	u64				index_horizon;
	/* the time of the latest event read: no later sample is before it */
	u64				index_watermark;
	/* the memory of the index, under max_queued_bytes; its peak */
	u64				index_bytes;
	u64				index_peak_bytes;
	/* index_bytes at which what no sample can use any more is freed */
	u64				index_sweep_bytes;
	/* records of the index a sample used */
	u64				index_used;
	/*
	 * records indexed: once the index has read the whole data, as many
	 * as the reader read (stats.records), or the two framed it apart
	 */
	u64				index_records;
	/*
	 * The file's deferred events have no time: the index holds file
	 * offsets instead, and a sample's offset stands for its time.
	 */
	bool				index_in_file_order;
	/* the index's key hashes and comparisons, for the tests to bound */
	u64				index_hashes;
	u64				index_compares;
	u64				*lost_times;
	size_t				nr_lost_times;
	size_t				lost_times_size;
	/* the chain of the sample being delivered joined */
	struct ip_callchain		*chain;
	u64				chain_size;
	struct deferred_callchain_stats	stats;
	deferred_callchain_deliver_fn	deliver;
	void				*priv;
};

int deferred_callchains__init(struct deferred_callchains *dc,
			      deferred_callchain_deliver_fn deliver, void *priv);
void deferred_callchains__exit(struct deferred_callchains *dc);

/*
 * Every event, in time order, once its sample is parsed. @copy is NULL, or
 * a copy of @event as it was before parsing (parsing byte-swaps some fields
 * in place), the join's to keep or free. Returns 0 or an error.
 */
int deferred_callchains__event(struct deferred_callchains *dc,
			       union perf_event *event, struct perf_sample *sample,
			       union perf_event *copy, u64 file_offset,
			       const char *file_path);
/* A loss that may have taken records: joins across it are ambiguous. */
bool deferred_callchain__lost_records(const union perf_event *event,
				      const struct perf_sample *sample);

/* The end of the data: what still waits is delivered unresolved. */
int deferred_callchains__flush(struct deferred_callchains *dc);

/*
 * Indexing a file's records ahead of its reader. deferred_callchains__
 * index_begin() starts an index that @scan fills as samples need it; or,
 * without a scanner, every record (copied) and every thread's exit is
 * given with its tid, time and file offset, and the time of every loss,
 * then deferred_callchains__index_done(). In a file whose deferred events
 * have no time, index_in_file_order is set and the times are file offsets.
 */
int deferred_callchains__index_begin(struct deferred_callchains *dc,
				     deferred_index_scan_fn scan, bool in_file_order);
int deferred_callchains__index_record(struct deferred_callchains *dc,
				      const union perf_event *record, u32 tid,
				      u64 time, u64 offset);
int deferred_callchains__index_exit(struct deferred_callchains *dc, u32 tid,
				    u64 time, u64 offset);
int deferred_callchains__index_lost(struct deferred_callchains *dc, u64 time);
void deferred_callchains__index_horizon(struct deferred_callchains *dc, u64 horizon);
int deferred_callchains__index_done(struct deferred_callchains *dc);
void deferred_callchains__index_free(struct deferred_callchains *dc);

struct evlist;

/* Whether an event asks for deferred callchains: else no join, no cost. */
bool evlist__has_deferred_callchains(struct evlist *evlist);

/*
 * The joined chain: the sample's kernel part (without a 6.19 sample's marker
 * and cookie), PERF_CONTEXT_USER, the record's ips; to free. @record may be
 * NULL: the kernel part alone.
 */
struct ip_callchain *deferred_callchain__join(const struct ip_callchain *kernel,
					      const union perf_event *record);
/* The same, valid until the next call */
struct ip_callchain *deferred_callchains__join(struct deferred_callchains *dc,
					       const struct ip_callchain *kernel,
					       const union perf_event *record);

/*
 * A mark is a frame of its own, the outermost of the user part: one address
 * in a mapping and a symbol named after the mark, in the top half of the
 * address space, where no user space is. The same in every tool, and in a
 * file perf inject --merge-callchains wrote: that writes the mapping as an
 * MMAP2 of the mark's name, which this perf gives the mark's symbol (and
 * older perfs show as the dso of an unknown symbol).
 */
#define DEFERRED_CALLCHAIN__MARK_START	0x8000000000000000ULL
#define DEFERRED_CALLCHAIN__MARK_SIZE	0x1000ULL

/* "[user stack unresolved]", "[user stack ambiguous]" or NULL */
const char *deferred_callchain__mark(const struct perf_sample *sample);
/* The address of the sample's mark (its mapping's start), 0 if it has none */
u64 deferred_callchain__mark_ip(const struct perf_sample *sample);
struct dso;
/* A dso named after a mark gets the mark's symbol, and is never read */
void deferred_callchain__mark_dso(struct dso *dso);
struct map;
/* The same, for a callchain frame: the mark whose mapping @map is, or NULL */
const char *deferred_callchain__mark_of(const struct map *map);
int callchain_cursor__append_deferred_mark(struct callchain_cursor *cursor,
					   struct thread *thread,
					   const struct perf_sample *sample);

size_t deferred_callchain_stats__fprintf(const struct deferred_callchain_stats *stats,
					 FILE *fp, const char *prefix);

#endif /* __PERF_DEFERRED_CALLCHAIN_H */
