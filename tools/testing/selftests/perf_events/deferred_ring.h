/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Ring-buffer reading for the PERF_SAMPLE_CALLCHAIN_DEFERRED selftests: map
 * an event's buffer, copy every record out (the data area wraps), advance
 * data_tail, and parse the records these tests use into struct ring_record.
 *
 * The layout is the same for a 32-bit (compat) reader: every field is a
 * __u64 in the records, and a compat task's addresses come zero-extended,
 * so that they compare equal to its unsigned long values.
 */
#ifndef DEFERRED_RING_H
#define DEFERRED_RING_H

#include <errno.h>
#include <linux/perf_event.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The sample fields the parser below understands, in record order. */
#define RING_SAMPLE_TYPES	(PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP |	\
				 PERF_SAMPLE_TID | PERF_SAMPLE_TIME |		\
				 PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID |	\
				 PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |		\
				 PERF_SAMPLE_CALLCHAIN |			\
				 PERF_SAMPLE_CALLCHAIN_DEFERRED)

#define RING_MAX_RECORD		65536

/* One record, copied out of the ring and parsed. */
struct ring_record {
	__u32 type;
	__u16 misc;
	__u16 size;
	bool malformed;		/* sizes do not add up; see ring.why */
	__u32 pid, tid;		/* sample, EXIT, COMM, or sample_id */
	__u64 time;
	__u64 id;
	__u64 cpu;
	__u64 ip;		/* PERF_RECORD_SAMPLE */
	__u64 cookie;		/* SAMPLE and CALLCHAIN_DEFERRED */
	__u64 lost;		/* LOST and LOST_SAMPLES */
	__u64 nr;		/* callchain or deferred ips */
	__u64 *ips;
};

struct ring {
	int fd;
	__u64 sample_type;
	__u64 read_format;
	bool sample_id_all;
	bool keep_tail;		/* never advance data_tail (no reader) */
	size_t hold_back;	/* read bytes not handed back to the kernel */
	struct perf_event_mmap_page *meta;
	char *data;
	size_t data_size;
	size_t map_size;
	__u64 off;		/* next byte to read */
	struct ring_record *rec;
	size_t nr_rec, cap_rec;
	size_t nr_samples;
	size_t nr_malformed;
	char why[160];		/* what the first malformed record looked like */
};

static inline double ring_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline int perf_open(struct perf_event_attr *attr, pid_t pid, int cpu)
{
	return syscall(__NR_perf_event_open, attr, pid, cpu, -1, 0);
}

/*
 * Map data_pages pages of fd's buffer (a power of 2); 0 on success, -1 with
 * errno set otherwise.
 */
static inline int ring_map(struct ring *r, int fd, const struct perf_event_attr *attr,
			   size_t data_pages)
{
	long page = sysconf(_SC_PAGESIZE);

	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->sample_type = attr->sample_type;
	r->read_format = attr->read_format;
	r->sample_id_all = attr->sample_id_all;
	if (r->sample_type & ~(__u64)RING_SAMPLE_TYPES) {
		errno = EINVAL;
		return -1;
	}
	r->data_size = data_pages * page;
	r->map_size = r->data_size + page;
	r->meta = mmap(NULL, r->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r->meta == MAP_FAILED) {
		r->meta = NULL;
		return -1;
	}
	r->data = (char *)r->meta + page;
	return 0;
}

static inline void ring_unmap(struct ring *r)
{
	size_t i;

	for (i = 0; i < r->nr_rec; i++)
		free(r->rec[i].ips);
	free(r->rec);
	if (r->meta)
		munmap(r->meta, r->map_size);
	r->rec = NULL;
	r->meta = NULL;
	r->nr_rec = 0;
	r->cap_rec = 0;
}

/* Copy len bytes at offset off of the data area, which may wrap. */
static inline void ring_copy(const struct ring *r, void *dst, __u64 off, size_t len)
{
	size_t pos = off % r->data_size;
	size_t first = len < r->data_size - pos ? len : r->data_size - pos;

	memcpy(dst, r->data + pos, first);
	memcpy((char *)dst + first, r->data, len - first);
}

static inline void ring_malformed(struct ring *r, struct ring_record *rr,
				  const char *what)
{
	rr->malformed = true;
	if (!r->nr_malformed++)
		snprintf(r->why, sizeof(r->why),
			 "record type %u size %u: %s", rr->type, rr->size, what);
}

/* Number of u64 words of struct sample_id at the end of other records. */
static inline size_t ring_sample_id_words(const struct ring *r)
{
	const __u64 bits = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID |
			   PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU |
			   PERF_SAMPLE_IDENTIFIER;

	if (!r->sample_id_all)
		return 0;
	return __builtin_popcountll(r->sample_type & bits);
}

/* Parse struct sample_id from the words w[0..] into rr. */
static inline void ring_parse_sample_id(const struct ring *r, const __u64 *w,
					struct ring_record *rr)
{
	size_t i = 0;

	if (r->sample_type & PERF_SAMPLE_TID) {
		rr->pid = (__u32)w[i];
		rr->tid = (__u32)(w[i++] >> 32);
	}
	if (r->sample_type & PERF_SAMPLE_TIME)
		rr->time = w[i++];
	if (r->sample_type & PERF_SAMPLE_ID)
		rr->id = w[i++];
	if (r->sample_type & PERF_SAMPLE_STREAM_ID)
		i++;
	if (r->sample_type & PERF_SAMPLE_CPU)
		rr->cpu = (__u32)w[i++];
	if (r->sample_type & PERF_SAMPLE_IDENTIFIER)
		rr->id = w[i++];
}

static inline void ring_parse_sample(struct ring *r, const __u64 *w, size_t words,
				     struct ring_record *rr)
{
	size_t pos = 1;

	if (r->sample_type & PERF_SAMPLE_IDENTIFIER)
		rr->id = w[pos++];
	if (r->sample_type & PERF_SAMPLE_IP)
		rr->ip = w[pos++];
	if (r->sample_type & PERF_SAMPLE_TID) {
		rr->pid = (__u32)w[pos];
		rr->tid = (__u32)(w[pos++] >> 32);
	}
	if (r->sample_type & PERF_SAMPLE_TIME)
		rr->time = w[pos++];
	if (r->sample_type & PERF_SAMPLE_ID)
		rr->id = w[pos++];
	if (r->sample_type & PERF_SAMPLE_STREAM_ID)
		pos++;
	if (r->sample_type & PERF_SAMPLE_CPU)
		rr->cpu = (__u32)w[pos++];
	if (r->sample_type & PERF_SAMPLE_PERIOD)
		pos++;
	if (pos > words) {
		ring_malformed(r, rr, "sample shorter than its fixed fields");
		return;
	}
	if (r->sample_type & PERF_SAMPLE_CALLCHAIN) {
		if (pos >= words || w[pos] > words - pos - 1) {
			ring_malformed(r, rr, "callchain nr overruns the sample");
			return;
		}
		rr->nr = w[pos++];
		rr->ips = malloc(rr->nr * 8 + 8);
		if (rr->ips)
			memcpy(rr->ips, &w[pos], rr->nr * 8);
		pos += rr->nr;
	}
	if (r->sample_type & PERF_SAMPLE_CALLCHAIN_DEFERRED) {
		if (pos >= words) {
			ring_malformed(r, rr, "no room for the cookie");
			return;
		}
		rr->cookie = w[pos++];
	}
	if (pos != words)
		ring_malformed(r, rr, "sample size does not match its fields");
}

static inline void ring_parse(struct ring *r, const __u64 *w, struct ring_record *rr)
{
	size_t words = rr->size / 8, sid = ring_sample_id_words(r), body;

	if (rr->type == PERF_RECORD_SAMPLE) {
		ring_parse_sample(r, w, words, rr);
		return;
	}
	if (words < 1 + sid) {
		ring_malformed(r, rr, "no room for sample_id");
		return;
	}
	ring_parse_sample_id(r, &w[words - sid], rr);
	body = words - sid - 1;		/* words between header and sample_id */

	switch (rr->type) {
	case PERF_RECORD_CALLCHAIN_DEFERRED:
		if (body < 2 || w[2] != body - 2) {
			ring_malformed(r, rr, "nr does not match the record size");
			return;
		}
		rr->cookie = w[1];
		rr->nr = w[2];
		rr->ips = malloc(rr->nr * 8 + 8);
		if (rr->ips)
			memcpy(rr->ips, &w[3], rr->nr * 8);
		break;
	case PERF_RECORD_EXIT:
	case PERF_RECORD_COMM:
		if (body < 1) {
			ring_malformed(r, rr, "no pid/tid");
			return;
		}
		rr->pid = (__u32)w[1];
		/* EXIT: pid, ppid, tid, ptid; COMM: pid, tid, comm[] */
		rr->tid = rr->type == PERF_RECORD_EXIT ? (__u32)w[2] :
			  (__u32)(w[1] >> 32);
		break;
	case PERF_RECORD_LOST:
		if (body < 2) {
			ring_malformed(r, rr, "no id/lost");
			return;
		}
		rr->id = w[1];
		rr->lost = w[2];
		break;
	case PERF_RECORD_LOST_SAMPLES:
		if (body < 1) {
			ring_malformed(r, rr, "no lost count");
			return;
		}
		rr->lost = w[1];
		break;
	}
}

/*
 * Append the record of header hdr at offset off of the data area to
 * r->rec, copied out and parsed; NULL when out of memory.
 */
static inline struct ring_record *ring_append(struct ring *r,
					      const struct perf_event_header *hdr,
					      __u64 off)
{
	static __u64 w[RING_MAX_RECORD / 8];
	struct ring_record *rr;

	if (r->nr_rec == r->cap_rec) {
		size_t cap = r->cap_rec ? 2 * r->cap_rec : 1024;
		void *p = realloc(r->rec, cap * sizeof(*r->rec));

		if (!p)
			return NULL;
		r->rec = p;
		r->cap_rec = cap;
	}
	rr = &r->rec[r->nr_rec++];
	memset(rr, 0, sizeof(*rr));
	rr->type = hdr->type;
	rr->misc = hdr->misc;
	rr->size = hdr->size;
	ring_copy(r, w, off, hdr->size);
	ring_parse(r, w, rr);
	r->nr_samples += rr->type == PERF_RECORD_SAMPLE;
	return rr;
}

/*
 * Copy out and parse every record between data_tail and data_head, then
 * hand the space back to the kernel unless r->keep_tail, all of it but the
 * last r->hold_back bytes.
 * Returns the number of records read, -1 on a broken ring.
 */
static inline int ring_drain(struct ring *r)
{
	__u64 head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	int n = 0;

	while (r->off < head) {
		struct perf_event_header hdr;

		ring_copy(r, &hdr, r->off, sizeof(hdr));
		if (hdr.size < sizeof(hdr) || hdr.size % 8 ||
		    hdr.size > head - r->off) {
			if (!r->nr_malformed++)
				snprintf(r->why, sizeof(r->why),
					 "header size %u at offset %llu",
					 hdr.size, (unsigned long long)r->off);
			r->off = head;
			return -1;
		}
		if (!ring_append(r, &hdr, r->off))
			return -1;
		r->off += hdr.size;
		n++;
	}
	if (!r->keep_tail && r->off > r->hold_back)
		__atomic_store_n(&r->meta->data_tail, r->off - r->hold_back,
				 __ATOMIC_RELEASE);
	return n;
}

/* Is this a context marker (PERF_CONTEXT_*) rather than an address? */
static inline bool ring_is_context(__u64 ip)
{
	return ip >= (__u64)PERF_CONTEXT_MAX;
}

#endif /* DEFERRED_RING_H */
