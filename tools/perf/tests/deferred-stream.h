/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Streams of synthesized events with deferred callchains, in perf's pipe
 * format or as perf.data files, in either byte order, in this project's
 * layout or Linux 6.19's: written by the join's tests
 * (tests/deferred-callchain.c) and by the deferredstream workload
 * (tests/workloads/deferredstream.c) for the shell tests.
 */
#ifndef __PERF_TESTS_DEFERRED_STREAM_H
#define __PERF_TESTS_DEFERRED_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/types.h>

union perf_event;
struct perf_event_attr;
struct perf_sample;

#define SAMPLE_TYPE	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | \
			 PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_CALLCHAIN_DEFERRED)

/* What sample_id_all appends to other records for SAMPLE_TYPE */
struct test_sample_id {
	u32 pid, tid;
	u64 time;
};

/* context markers, short for the tables of expected chains */
#define CTX_K	PERF_CONTEXT_KERNEL
#define CTX_U	PERF_CONTEXT_USER

#define MAX_IPS		32

#define KIP1	0xffffffff81000010ULL
#define KIP2	0xffffffff81000020ULL
#define KIP3	0xffffffff81000030ULL
#define UIP0	0x400ff0ULL
#define UIP1	0x401010ULL
#define UIP2	0x401020ULL
#define UIP3	0x401030ULL

#define PID	1000
#define TID1	1001
#define TID2	1002
#define TID3	1003
#define TID4	1004

/* Cookies as the kernel makes them: (odd counter << 32) | (cpu + 1) */
#define COOKIE1	0x0000000100000001ULL
#define COOKIE2	0x0000000300000001ULL
#define COOKIE3	0x0000000100000002ULL
#define COOKIE4	0x0000000500000001ULL
#define COOKIE5	0x0000000300000002ULL

struct ips {
	u64		nr;
	const u64	*ips;
};

#define IPS(...) {							\
	.nr  = ARRAY_SIZE(((const u64[]){ __VA_ARGS__ })),		\
	.ips = (const u64[]){ __VA_ARGS__ },				\
}

/*
 * One set of rules: a stream read through the queue (a pipe) and the same
 * events indexed first (a file) give every sample the same fate, the same
 * stack and the same counts. The stream has what sets the two apart if
 * the index forgets a rule: duplicate records, a record whose clock is
 * behind its sample's, an exit between a sample and its record, a newer
 * record first, records of threads nobody sampled, a cookie that comes
 * round again, and a loss.
 */
enum scripted_kind { SCRIPTED_SAMPLE, SCRIPTED_RECORD, SCRIPTED_EXIT, SCRIPTED_LOST };

struct scripted {
	enum scripted_kind	kind;
	u32			tid;
	u64			time;
	u64			cookie;
	const struct ips	*ips;
	/* written after the next event: its CPU's buffer came later */
	bool			late;
};

/*
 * Session level: pipe streams written to a file and read back as a pipe,
 * the way 'perf record -o - > file; perf script -i - < file' does.
 */
#define PERF_MAGIC2	0x32454c4946524550ULL	/* "PERFILE2" */

struct stream {
	int	fd;
	bool	swap;	/* write in the other byte order */
	/*
	 * as Linux 6.19 writes them: attr.defer_callchain and defer_output,
	 * the cookie at the end of the sample's callchain after its marker,
	 * the record's ips after PERF_CONTEXT_USER
	 */
	bool	mainline;
	bool	failed;
	u64	sample_type;
	/* for sample_ids with PERF_SAMPLE_CPU or PERF_SAMPLE_IDENTIFIER */
	u32	cpu;
	u64	id;
	/* the perf.data file the events go to, from stream__file_begin() */
	int	file_fd;
	/* its data compressed, as perf record -z writes them */
	bool	compress;
	/* attrs without sample_id_all, events other than samples without ids */
	bool	no_sample_id;
	/* AUX area data at the end of each round */
	bool	aux;
	/*
	 * a perf.data directory, as perf record --threads writes it: the
	 * main file's data, then each thread's file (stream__to_file_of())
	 */
	bool	dir;
	int	dir_fds[3];
};

extern const struct ips kernel_a;
extern const struct ips kernel_b;
extern const struct ips kernel_c;
extern const struct ips user_mode;
extern const struct ips stack_a;
extern const struct ips stack_b;
extern const struct ips stack_empty;
extern const struct scripted rules_stream[];
extern const size_t rules_stream_nr;

union perf_event *sample__synthesize_pid(union perf_event *event, u64 sample_type,
					 u64 read_format, struct perf_sample *sample,
					 const struct ips *kernel, u32 pid);
union perf_event *sample__synthesize(union perf_event *event, u64 sample_type,
				     u64 read_format, struct perf_sample *sample,
				     const struct ips *kernel);
void sample_id__put(void *p, u32 pid, u32 tid, u64 time);
union perf_event *record__build(union perf_event *event, u32 pid, u32 tid, u64 time,
				u64 cookie, const struct ips *stack);
union perf_event *exit__build(union perf_event *event, u32 tid, u64 time);
union perf_event *lost__build(union perf_event *event, u64 time, u64 lost);
void attr__to_foreign(struct perf_event_attr *attr);
void u64s__to_foreign(u64 *words, size_t nr);
int scratch_file(void);
int copy_data(int fd, int data_fd);
void stream__write(struct stream *s, const void *buf, size_t size);
void stream__put(struct stream *s, union perf_event *event);
void event_attr__init(struct perf_event_attr *attr, u32 type, u64 config, u64 period,
		      u64 sample_type, u64 read_format);
void stream__attr_event(struct stream *s, u32 type, u64 config, u64 period,
			u64 read_format, u64 id);
void stream__attr(struct stream *s, u64 read_format, u64 id);
union perf_event *stream__sample_id(struct stream *s, union perf_event *event);
void stream__sample(struct stream *s, u32 tid, u64 time, u64 cookie,
		    const struct ips *kernel);
void stream__record(struct stream *s, u32 tid, u64 time, u64 cookie,
		    const struct ips *stack);
void stream__exit(struct stream *s, u32 tid, u64 time);
void stream__lost(struct stream *s, u64 time, u64 lost);

#endif /* __PERF_TESTS_DEFERRED_STREAM_H */
