// SPDX-License-Identifier: GPL-2.0
/*
 * The events of deferred-stream.h: samples and records built in perf's
 * layout, turned into the other byte order, written as a pipe stream.
 */
#include <byteswap.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <linux/kernel.h>
#include <linux/types.h>
#include <perf/event.h>
#include <internal/lib.h>

#include "event.h"
#include "header.h"
#include "sample.h"
#include "util/deferred-callchain.h"
#include "util/synthetic-events.h"
#include "deferred-stream.h"

/* kernel parts of samples, user stacks of records */
const struct ips kernel_a = IPS(CTX_K, KIP1, KIP2);
const struct ips kernel_b = IPS(CTX_K, KIP3);
const struct ips kernel_c = IPS(CTX_K, KIP1);
const struct ips user_mode = { .nr = 0, };
const struct ips stack_a = IPS(UIP1, UIP2);
const struct ips stack_b = IPS(UIP3);
const struct ips stack_empty = { .nr = 0, };

/*
 * A sample of @sample_type and @read_format: the fields of @sample that it
 * has (tid, time, cookie, raw and read data, id, cpu, period), with pid
 * @pid and the chain @kernel.
 */
union perf_event *sample__synthesize_pid(union perf_event *event, u64 sample_type,
					 u64 read_format, struct perf_sample *sample,
					 const struct ips *kernel, u32 pid)
{
	u64 chain[1 + MAX_IPS] = { kernel->nr, };
	u64 nr_frames = kernel->nr;
	size_t size;

	if (kernel->nr > MAX_IPS)
		return NULL;
	/* the u32 size and the data fill whole u64s, as the kernel pads them */
	if ((sample_type & PERF_SAMPLE_RAW) && (sizeof(u32) + sample->raw_size) % sizeof(u64))
		return NULL;
	if (kernel->nr)	/* an empty chain's ips may be NULL */
		memcpy(&chain[1], kernel->ips, kernel->nr * sizeof(u64));
	/* a 6.19 sample's marker and cookie say nothing of where it was taken */
	if (callchain__deferred_cookie((struct ip_callchain *)chain))
		nr_frames -= 2;
	sample->ip = nr_frames > 1 ? kernel->ips[1] : UIP0;
	sample->pid = pid;
	sample->callchain = (struct ip_callchain *)chain;
	size = perf_event__sample_event_size(sample, sample_type, read_format);
	if (size > sizeof(*event))
		return NULL;

	memset(event, 0, sizeof(*event));
	event->header.type = PERF_RECORD_SAMPLE;
	event->header.misc = nr_frames ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER;
	event->header.size = size;
	if (perf_event__synthesize_sample(event, sample_type, read_format, sample))
		return NULL;
	return event;
}

union perf_event *sample__synthesize(union perf_event *event, u64 sample_type,
				     u64 read_format, struct perf_sample *sample,
				     const struct ips *kernel)
{
	return sample__synthesize_pid(event, sample_type, read_format, sample, kernel, PID);
}

void sample_id__put(void *p, u32 pid, u32 tid, u64 time)
{
	struct test_sample_id *id = p;

	id->pid = pid;
	id->tid = tid;
	id->time = time;
}

union perf_event *record__build(union perf_event *event, u32 pid, u32 tid, u64 time,
				u64 cookie, const struct ips *stack)
{
	struct perf_record_callchain_deferred *rec = &event->callchain_deferred;
	size_t size = sizeof(*rec) + stack->nr * sizeof(u64) + sizeof(struct test_sample_id);

	if (size > sizeof(*event))
		return NULL;

	memset(event, 0, sizeof(*event));
	rec->header.type = PERF_RECORD_CALLCHAIN_DEFERRED;
	rec->header.misc = PERF_RECORD_MISC_USER;
	rec->header.size = size;
	rec->cookie = cookie;
	rec->nr = stack->nr;
	if (stack->nr)	/* an empty stack's ips may be NULL */
		memcpy(rec->ips, stack->ips, stack->nr * sizeof(u64));
	sample_id__put(&rec->ips[stack->nr], pid, tid, time);
	return event;
}

union perf_event *exit__build(union perf_event *event, u32 tid, u64 time)
{
	struct perf_record_fork *ev = &event->fork;

	memset(event, 0, sizeof(*event));
	ev->header.type = PERF_RECORD_EXIT;
	ev->header.size = sizeof(*ev) + sizeof(struct test_sample_id);
	ev->pid = PID;
	ev->ppid = PID;
	ev->tid = tid;
	ev->ptid = PID;
	ev->time = time;
	sample_id__put(ev + 1, PID, tid, time);
	return event;
}

union perf_event *lost__build(union perf_event *event, u64 time, u64 lost)
{
	struct perf_record_lost *ev = &event->lost;

	memset(event, 0, sizeof(*event));
	ev->header.type = PERF_RECORD_LOST;
	ev->header.size = sizeof(*ev) + sizeof(struct test_sample_id);
	ev->id = 1;
	ev->lost = lost;
	/* a loss is not any one thread's: the join ignores its tid */
	sample_id__put(ev + 1, (u32)-1, (u32)-1, time);
	return event;
}

const struct scripted rules_stream[] = {
	/* duplicates: the first after the sample is its own ... */
	{ SCRIPTED_SAMPLE, TID1, 1, COOKIE1, &kernel_a, false },
	{ SCRIPTED_RECORD, TID1, 2, COOKIE1, &stack_a, false },
	{ SCRIPTED_RECORD, TID1, 3, COOKIE1, &stack_b, false },
	/* ... and the last before it, backward */
	{ SCRIPTED_SAMPLE, TID1, 4, COOKIE1, &kernel_b, false },
	/* an exit in between: the record is not this thread's any more */
	{ SCRIPTED_SAMPLE, TID2, 5, COOKIE2, &kernel_a, false },
	{ SCRIPTED_EXIT, TID2, 6, 0, NULL, false },
	{ SCRIPTED_RECORD, TID2, 7, COOKIE2, &stack_a, false },
	/* a newer record first: this stay's is not coming */
	{ SCRIPTED_SAMPLE, TID3, 8, COOKIE3, &kernel_a, false },
	{ SCRIPTED_RECORD, TID3, 9, COOKIE4, &stack_b, false },
	{ SCRIPTED_RECORD, TID3, 10, COOKIE3, &stack_a, false },
	/* nobody sampled this thread */
	{ SCRIPTED_RECORD, TID4, 11, COOKIE5, &stack_a, false },
	/* a record whose CPU's clock is behind the sample's */
	{ SCRIPTED_RECORD, TID1, 12, COOKIE2, &stack_b, true },
	{ SCRIPTED_SAMPLE, TID1, 13, COOKIE2, &kernel_c, false },
	/* the cookie of the first stay again: not its old records' */
	{ SCRIPTED_SAMPLE, TID1, 14, COOKIE1, &kernel_a, false },
	{ SCRIPTED_LOST, 0, 15, 0, NULL, false },
	{ SCRIPTED_RECORD, TID1, 16, COOKIE1, &stack_empty, false },
	{ SCRIPTED_SAMPLE, TID3, 17, COOKIE3, &kernel_b, false },
};

const size_t rules_stream_nr = ARRAY_SIZE(rules_stream);

static u8 bitrev8(u8 byte)
{
	u8 rev = 0;

	for (int i = 0; i < 8; i++)
		if (byte & (1U << i))
			rev |= 1U << (7 - i);
	return rev;
}

/* How a machine of the other byte order writes its struct perf_event_attr. */
void attr__to_foreign(struct perf_event_attr *attr)
{
	u8 *bitfields = (u8 *)(&attr->read_format + 1);

	attr->type		= bswap_32(attr->type);
	attr->size		= bswap_32(attr->size);
	attr->config		= bswap_64(attr->config);
	attr->sample_period	= bswap_64(attr->sample_period);
	attr->sample_type	= bswap_64(attr->sample_type);
	attr->read_format	= bswap_64(attr->read_format);
	/* bit fields are allocated from the other end of each byte */
	for (size_t i = 0; i < sizeof(u64); i++)
		bitfields[i] = bitrev8(bitfields[i]);
	attr->wakeup_events	= bswap_32(attr->wakeup_events);
	attr->bp_type		= bswap_32(attr->bp_type);
	attr->config1		= bswap_64(attr->config1);
	attr->config2		= bswap_64(attr->config2);
	attr->branch_sample_type = bswap_64(attr->branch_sample_type);
	attr->sample_regs_user	= bswap_64(attr->sample_regs_user);
	attr->sample_stack_user	= bswap_32(attr->sample_stack_user);
	attr->sample_regs_intr	= bswap_64(attr->sample_regs_intr);
	attr->aux_watermark	= bswap_32(attr->aux_watermark);
	attr->sample_max_stack	= bswap_16(attr->sample_max_stack);
	attr->aux_sample_size	= bswap_32(attr->aux_sample_size);
}

/* Two u32 sharing a u64 (pid and tid): each swapped in place. */
static void u32_pair__to_foreign(u64 *word)
{
	u32 *pair = (u32 *)word;

	pair[0] = bswap_32(pair[0]);
	pair[1] = bswap_32(pair[1]);
}

void u64s__to_foreign(u64 *words, size_t nr)
{
	for (size_t i = 0; i < nr; i++)
		words[i] = bswap_64(words[i]);
}

/* Rewrites one of the events built here field by field in the other byte order. */
static void event__to_foreign(union perf_event *event, u64 sample_type)
{
	u64 *words = (u64 *)(&event->header + 1);
	size_t nr = (event->header.size - sizeof(event->header)) / sizeof(u64);
	/* sample_id_all: { u32 pid, tid; u64 time; } ends the other records */
	u64 *sample_id_tid = &words[nr - 2];

	switch (event->header.type) {
	case PERF_RECORD_HEADER_ATTR: {
		u64 *ids = perf_record_header_attr_id(event);

		u64s__to_foreign(ids, ((void *)event + event->header.size - (void *)ids) /
				 sizeof(u64));
		attr__to_foreign(&event->attr.attr);
		break;
	}
	case PERF_RECORD_SAMPLE: {
		/* { u64 ip; u32 pid, tid; u64 time; u64 nr, ips[nr]; u64 cookie; } */
		u64 nr_ips = words[3];
		u64 *raw = &words[4 + nr_ips];
		size_t raw_words;

		u64s__to_foreign(&words[0], 1);
		u32_pair__to_foreign(&words[1]);
		if (!(sample_type & PERF_SAMPLE_RAW)) {
			u64s__to_foreign(&words[2], nr - 2);
			break;
		}
		/*
		 * The raw data comes before the cookie: a u32 size in the
		 * writer's order, then bytes that have no byte order.
		 */
		raw_words = (sizeof(u32) + *(u32 *)raw) / sizeof(u64);
		u64s__to_foreign(&words[2], 2 + nr_ips);
		*(u32 *)raw = bswap_32(*(u32 *)raw);
		u64s__to_foreign(raw + raw_words, nr - (raw - words) - raw_words);
		break;
	}
	case PERF_RECORD_EXIT:
		event->fork.pid  = bswap_32(event->fork.pid);
		event->fork.ppid = bswap_32(event->fork.ppid);
		event->fork.tid  = bswap_32(event->fork.tid);
		event->fork.ptid = bswap_32(event->fork.ptid);
		event->fork.time = bswap_64(event->fork.time);
		u64s__to_foreign(sample_id_tid + 1, 1);
		u32_pair__to_foreign(sample_id_tid);
		break;
	default:
		/* all u64 but the pid and tid of sample_id */
		u64s__to_foreign(words, nr - 2);
		u64s__to_foreign(sample_id_tid + 1, 1);
		u32_pair__to_foreign(sample_id_tid);
		break;
	}
	event->header.type = bswap_32(event->header.type);
	event->header.misc = bswap_16(event->header.misc);
	event->header.size = bswap_16(event->header.size);
}

/*
 * A scratch file, gone once closed: a stream's events, or a perf.data
 * file's data before the header that says where they end.
 */
int scratch_file(void)
{
	char path[] = "/tmp/perf-test-deferred-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return -errno;
	unlink(path);
	return fd;
}

/* Copies all of @data_fd to @fd. */
int copy_data(int fd, int data_fd)
{
	char buf[4096];
	ssize_t n;

	if (lseek(data_fd, 0, SEEK_SET))
		return -errno;
	while ((n = read(data_fd, buf, sizeof(buf))) > 0) {
		if (writen(fd, buf, n) != n)
			return -EIO;
	}
	return n < 0 ? -errno : 0;
}

void stream__write(struct stream *s, const void *buf, size_t size)
{
	if (!s->failed && writen(s->fd, buf, size) != (ssize_t)size)
		s->failed = true;
}

void stream__put(struct stream *s, union perf_event *event)
{
	size_t size;

	if (!event) {
		s->failed = true;
		return;
	}
	size = event->header.size;
	if (s->swap)
		event__to_foreign(event, s->sample_type);
	stream__write(s, event, size);
}

/* An event's attr as perf record writes it, for the streams and files here */
void event_attr__init(struct perf_event_attr *attr, u32 type, u64 config, u64 period,
		      u64 sample_type, u64 read_format)
{
	attr->type = type;
	attr->size = sizeof(*attr);
	attr->config = config;
	attr->sample_period = period;
	attr->sample_type = sample_type;
	attr->read_format = read_format;
	attr->sample_id_all = 1;
	attr->exclude_hv = 1;
	attr->sample_max_stack = 127;
}

/* The attr of an event of the stream's sample type, with its one id. */
void stream__attr_event(struct stream *s, u32 type, u64 config, u64 period,
			u64 read_format, u64 id)
{
	union perf_event buf = {
		.header = {
			.type = PERF_RECORD_HEADER_ATTR,
			.size = sizeof(struct perf_event_header) +
				sizeof(struct perf_event_attr) + sizeof(u64),
		},
	};

	event_attr__init(&buf.attr.attr, type, config, period, s->sample_type, read_format);
	buf.attr.attr.sample_id_all = !s->no_sample_id;
	/* 6.19's defer_callchain and defer_output, in 6.12's __reserved_1 */
	if (s->mainline)
		buf.attr.attr.__reserved_1 |= BIT(0) | BIT(1);
	/* one id, as perf record writes it: the session maps it to this event */
	*(u64 *)perf_record_header_attr_id(&buf) = id;
	stream__put(s, &buf);
}

void stream__attr(struct stream *s, u64 read_format, u64 id)
{
	stream__attr_event(s, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, 4000, read_format, id);
}

#define SAMPLE_ID_TYPE	(PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID | \
			 PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER)

/*
 * The records built here end in a struct test_sample_id, as SAMPLE_TYPE
 * has it. A stream of events with another sample_id gets theirs: the same
 * pid, tid and time where it has them, the stream's cpu and id.
 */
union perf_event *stream__sample_id(struct stream *s, union perf_event *event)
{
	u64 type = s->sample_type & SAMPLE_ID_TYPE;
	struct test_sample_id id;
	u64 words[5], *array = words;

	if (event && s->no_sample_id) {
		event->header.size -= sizeof(id);
		return event;
	}
	if (!event || type == (SAMPLE_TYPE & SAMPLE_ID_TYPE))
		return event;
	if (type & PERF_SAMPLE_STREAM_ID)
		return NULL;
	event->header.size -= sizeof(id);
	memcpy(&id, (void *)event + event->header.size, sizeof(id));
	if (type & PERF_SAMPLE_TID)
		*array++ = (u64)id.tid << 32 | id.pid;
	if (type & PERF_SAMPLE_TIME)
		*array++ = id.time;
	if (type & PERF_SAMPLE_ID)
		*array++ = s->id;
	if (type & PERF_SAMPLE_CPU)
		*array++ = s->cpu;
	if (type & PERF_SAMPLE_IDENTIFIER)
		*array++ = s->id;
	if (event->header.size + (array - words) * sizeof(u64) > sizeof(*event))
		return NULL;
	memcpy((void *)event + event->header.size, words, (array - words) * sizeof(u64));
	event->header.size += (array - words) * sizeof(u64);
	return event;
}

void stream__sample(struct stream *s, u32 tid, u64 time, u64 cookie,
		    const struct ips *kernel)
{
	struct perf_sample sample = {
		.tid	= tid,
		.time	= time,
		.cpu	= s->cpu,
		.id	= s->id,
		.deferred_cookie = cookie,
	};
	u64 ips[MAX_IPS];
	struct ips chain;
	union perf_event buf;

	if (s->mainline && cookie) {
		if (kernel->nr + 2 > MAX_IPS) {
			s->failed = true;
			return;
		}
		if (kernel->nr)
			memcpy(ips, kernel->ips, kernel->nr * sizeof(u64));
		ips[kernel->nr] = DEFERRED_CALLCHAIN__CONTEXT_USER_DEFERRED;
		ips[kernel->nr + 1] = cookie;
		chain = (struct ips){ .nr = kernel->nr + 2, .ips = ips, };
		kernel = &chain;
	}
	stream__put(s, sample__synthesize(&buf, s->sample_type, 0, &sample, kernel));
}

void stream__record(struct stream *s, u32 tid, u64 time, u64 cookie,
		    const struct ips *stack)
{
	u64 ips[MAX_IPS] = { PERF_CONTEXT_USER, };
	struct ips user;
	union perf_event buf;
	union perf_event *event;

	if (s->mainline) {
		if (stack->nr + 1 > MAX_IPS) {
			s->failed = true;
			return;
		}
		if (stack->nr)
			memcpy(&ips[1], stack->ips, stack->nr * sizeof(u64));
		user = (struct ips){ .nr = stack->nr + 1, .ips = ips, };
		stack = &user;
	}
	event = record__build(&buf, PID, tid, time, cookie, stack);

	stream__put(s, stream__sample_id(s, event));
}

void stream__exit(struct stream *s, u32 tid, u64 time)
{
	union perf_event buf;

	stream__put(s, stream__sample_id(s, exit__build(&buf, tid, time)));
}

void stream__lost(struct stream *s, u64 time, u64 lost)
{
	union perf_event buf;

	stream__put(s, stream__sample_id(s, lost__build(&buf, time, lost)));
}
