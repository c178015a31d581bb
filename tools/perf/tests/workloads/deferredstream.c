// SPDX-License-Identifier: GPL-2.0
/*
 * perf test -w deferredstream: streams and perf.data files of deferred
 * callchains for the shell tests, built of deferred-stream.h's events; no
 * kernel with the feature needed.
 */
#include <byteswap.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <linux/compiler.h>
#include <linux/kernel.h>
#include <linux/stringify.h>
#include <linux/time64.h>
#include <linux/types.h>
#include <linux/zalloc.h>
#include <perf/event.h>
#include <internal/lib.h>

#include "debug.h"
#include "event.h"
#include "data.h"
#include "header.h"
#include "sample.h"
#include "util/compress.h"
#include "../tests.h"
#include "../deferred-stream.h"

/*
 * perf test -w deferredstream MODE [N]: a pipe stream on stdout, for the
 * shell tests to read with every tool, no kernel needed.
 *   views:	every kind of deferred sample (joined, backward, user mode,
 *		ambiguous, unresolved at exit and at the end, not deferred),
 *		the user stacks in functions of this program, mapped by an
 *		MMAP2 so that tools name them;
 *   views-notime: the same without PERF_SAMPLE_TIME;
 *   wait N:	N samples of one thread that wait for their record, which
 *		comes last (what a waiting sample costs);
 *   joined N:	the same samples after their record, each joined at once;
 *   rules [file|swapped-file]: the stream of test__one_answer(), a
 *		record of a CPU whose clock is behind written after the sample
 *		it precedes; as a perf.data file with "file", one of the other
 *		byte order with "swapped-file";
 *   sched [file]: sched_switch and sched_wakeup samples of three tasks on
 *		two CPUs, for perf sched (deferredstream__sched()); a
 *		perf.data file with "file" (perf sched reads no pipe);
 *   sched-fp [file]: the same events with the stacks of plain fp
 *		callchains;
 *   bench N fp|defer: a perf.data file of N samples, their stacks whole
 *		(fp) or deferred (deferredstream__bench());
 *   offcpu N [file|swapped-file|compressed-file|aux-file|tracing-file]
 *   offcpu N dir|compressed-dir DIR:
 *		one thread's sample waiting for its record behind N stays of
 *		another (deferredstream__offcpu()); compressed as perf record
 *		-z does; with AUX area data (stream__aux()); with tracing data
 *		in the data section, as perf inject wrote them, and AUX area
 *		data (the index must step over both as the reader does); as
 *		a directory DIR that perf record --threads (-z) writes
 *		(stream__dir_end()).
 */
noinline void deferredstream_leaf(void);
noinline void deferredstream_mid(void);
noinline void deferredstream_top(void);

noinline void deferredstream_leaf(void)
{
	barrier();
}

noinline void deferredstream_mid(void)
{
	deferredstream_leaf();
	barrier();
}

noinline void deferredstream_top(void)
{
	deferredstream_mid();
	barrier();
}

/* Where this program's code is mapped, from /proc/self/maps. */
static int exe__text_map(char *path, size_t size, u64 *start, u64 *len, u64 *pgoff)
{
	u64 ip = (u64)(unsigned long)deferredstream_leaf;
	char line[PATH_MAX + 128];
	FILE *maps;
	int ret = -ENOENT;

	maps = fopen("/proc/self/maps", "r");
	if (!maps)
		return -errno;
	while (fgets(line, sizeof(line), maps)) {
		unsigned long lo, hi, off;
		char perm[5], file[PATH_MAX];

		if (sscanf(line, "%lx-%lx %4s %lx %*s %*s %s", &lo, &hi, perm, &off, file) != 5)
			continue;
		if (ip < lo || ip >= hi)
			continue;
		*start = lo;
		*len = hi - lo;
		*pgoff = off;
		snprintf(path, size, "%s", file);
		ret = 0;
		break;
	}
	fclose(maps);
	return ret;
}

static void stream__comm(struct stream *s, u32 tid, u64 time, const char *comm)
{
	union perf_event buf;
	struct perf_record_comm *ev = &buf.comm;

	memset(&buf, 0, sizeof(buf));
	ev->header.type = PERF_RECORD_COMM;
	ev->header.size = sizeof(*ev) + sizeof(struct test_sample_id);
	ev->pid = PID;
	ev->tid = tid;
	snprintf(ev->comm, sizeof(ev->comm), "%s", comm);
	sample_id__put(ev + 1, PID, tid, time);
	stream__put(s, stream__sample_id(s, &buf));
}

static void stream__mmap2(struct stream *s, u64 time, const char *path,
			  u64 start, u64 len, u64 pgoff)
{
	union perf_event buf;
	struct perf_record_mmap2 *ev = &buf.mmap2;
	size_t size = offsetof(struct perf_record_mmap2, filename) +
		      PERF_ALIGN(strlen(path) + 1, sizeof(u64));

	memset(&buf, 0, sizeof(buf));
	if (size + sizeof(struct test_sample_id) > sizeof(buf)) {
		s->failed = true;
		return;
	}
	ev->header.type = PERF_RECORD_MMAP2;
	ev->header.misc = PERF_RECORD_MISC_USER;
	ev->header.size = size + sizeof(struct test_sample_id);
	ev->pid = PID;
	ev->tid = PID;
	ev->start = start;
	ev->len = len;
	ev->pgoff = pgoff;
	ev->prot = PROT_READ | PROT_EXEC;
	ev->flags = MAP_PRIVATE;
	memcpy(ev->filename, path, strlen(path) + 1);
	sample_id__put((void *)ev + size, PID, PID, time);
	stream__put(s, stream__sample_id(s, &buf));
}

static int deferredstream__views(struct stream *s)
{
	/* return addresses inside the functions, as a walk finds them */
	const u64 leaf = (u64)(unsigned long)deferredstream_leaf + 1;
	const u64 mid = (u64)(unsigned long)deferredstream_mid + 1;
	const u64 top = (u64)(unsigned long)deferredstream_top + 1;
	const struct ips stack_deep = { 3, (const u64[]){ leaf, mid, top } };
	const struct ips stack_short = { 2, (const u64[]){ mid, top } };
	const struct ips fp_chain = { 5, (const u64[]){ CTX_K, KIP2, CTX_U, mid, top } };
	char path[PATH_MAX];
	u64 start = 0, len = 0, pgoff = 0;

	if (exe__text_map(path, sizeof(path), &start, &len, &pgoff))
		return -ENOENT;
	stream__mmap2(s, 10, path, start, len, pgoff);
	for (u32 tid = TID1; tid <= TID4; tid++)
		stream__comm(s, tid, 20, "deferred-views");

	stream__sample(s, TID1, 100, COOKIE1, &kernel_a);	/* joined */
	stream__sample(s, TID2, 105, 0, &fp_chain);		/* not deferred */
	stream__sample(s, TID2, 110, COOKIE2, &kernel_c);	/* unresolved at the end */
	stream__sample(s, TID1, 120, COOKIE1, &kernel_b);	/* joined */
	stream__record(s, TID1, 130, COOKIE1, &stack_deep);
	stream__sample(s, TID1, 140, COOKIE1, &kernel_c);	/* backward */
	stream__sample(s, TID3, 150, COOKIE3, &user_mode);	/* user mode, joined */
	stream__record(s, TID3, 160, COOKIE3, &stack_short);
	stream__sample(s, TID1, 170, COOKIE4, &kernel_c);	/* unresolved at exit */
	stream__exit(s, TID1, 180);
	stream__sample(s, TID4, 190, COOKIE5, &kernel_b);	/* ambiguous */
	stream__lost(s, 195, 3);
	stream__record(s, TID4, 197, COOKIE5, &stack_deep);
	return s->failed ? -EIO : 0;
}

/* test__one_answer()'s stream, as a file would have it out of time order */
static int deferredstream__rules(struct stream *s)
{
	const struct scripted *late = NULL;

	for (size_t i = 0; i < rules_stream_nr; i++) {
		const struct scripted *ev = &rules_stream[i];

		if (ev->late && !late) {
			late = ev;
			continue;
		}
		switch (ev->kind) {
		case SCRIPTED_SAMPLE:
			stream__sample(s, ev->tid, ev->time, ev->cookie, ev->ips);
			break;
		case SCRIPTED_RECORD:
			stream__record(s, ev->tid, ev->time, ev->cookie, ev->ips);
			break;
		case SCRIPTED_EXIT:
			stream__exit(s, ev->tid, ev->time);
			break;
		case SCRIPTED_LOST:
			stream__lost(s, ev->time, 1);
			break;
		default:
			return -EINVAL;
		}
		if (late) {
			stream__record(s, late->tid, late->time, late->cookie, late->ips);
			late = NULL;
		}
	}
	return s->failed ? -EIO : 0;
}

/* A compressed stream's mmap_len: what one compressed event holds at most */
#define STREAM__COMP_MMAP_LEN	(1024 * 1024)

/* An attr of a perf.data file, as util/header.c writes them */
struct file_attr {
	struct perf_event_attr		attr;
	struct perf_file_section	ids;
};

/*
 * A perf.data file of one event, stream__attr()'s with @id, whose data are
 * the events written to @data_fd; features only those of a compressed
 * file and of a directory's. In the other byte order when s->swap, as a
 * machine of that order writes it.
 */
static int stream__write_file(struct stream *s, int fd, int data_fd, u64 id)
{
	struct perf_file_header header = {
		.magic		= PERF_MAGIC2,
		.size		= sizeof(header),
		.attr_size	= sizeof(struct file_attr),
	};
	/* HEADER_COMPRESSED: version, type, level, ratio, mmap_len */
	const u32 compressed[] = { 1, PERF_COMP_ZSTD, 1, 1, STREAM__COMP_MMAP_LEN };
	/* HEADER_DIR_FORMAT */
	const u64 dir_version = PERF_DIR_VERSION;
	off_t data_size = lseek(data_fd, 0, SEEK_END);
	/* the features' sections follow the data, in the order of their bits */
	struct perf_file_section features[2];
	const void *feature_data[2];
	int nr_features = 0;
	struct file_attr attr;
	u64 offset;

	if (data_size < 0)
		return -errno;
	memset(&attr, 0, sizeof(attr));
	event_attr__init(&attr.attr, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, 4000,
			 s->sample_type, 0);
	attr.ids.offset = sizeof(header);
	attr.ids.size = sizeof(id);
	header.attrs.offset = sizeof(header) + sizeof(id);
	header.attrs.size = sizeof(attr);
	header.data.offset = header.attrs.offset + sizeof(attr);
	header.data.size = data_size;
	if (s->dir) {
		__set_bit(HEADER_DIR_FORMAT, header.adds_features);
		feature_data[nr_features] = &dir_version;
		features[nr_features++].size = sizeof(dir_version);
	}
	if (s->compress) {
		__set_bit(HEADER_COMPRESSED, header.adds_features);
		feature_data[nr_features] = compressed;
		features[nr_features++].size = sizeof(compressed);
	}
	offset = header.data.offset + data_size + nr_features * sizeof(features[0]);
	for (int i = 0; i < nr_features; i++) {
		features[i].offset = offset;
		offset += features[i].size;
	}
	if (s->swap) {
		/* the u64s before the features' bitmap, none set */
		u64s__to_foreign(&header.magic,
				 offsetof(struct perf_file_header, adds_features) / sizeof(u64));
		attr__to_foreign(&attr.attr);
		u64s__to_foreign(&attr.ids.offset, 2);
		u64s__to_foreign(&id, 1);
	}
	if (writen(fd, &header, sizeof(header)) != sizeof(header) ||
	    writen(fd, &id, sizeof(id)) != sizeof(id) ||
	    writen(fd, &attr, sizeof(attr)) != sizeof(attr) ||
	    copy_data(fd, data_fd))
		return -EIO;
	if (nr_features &&
	    writen(fd, features, nr_features * sizeof(features[0])) !=
	    (ssize_t)(nr_features * sizeof(features[0])))
		return -EIO;
	for (int i = 0; i < nr_features; i++) {
		if (writen(fd, feature_data[i], features[i].size) != (ssize_t)features[i].size)
			return -EIO;
	}
	return 0;
}

/*
 * The events written between the two go to a perf.data file of one event
 * with @id (stream__write_file()), in the other byte order if @swap: they
 * are set aside first, for the header says where they end.
 */
static int stream__file_begin(struct stream *s, bool swap, u64 id)
{
	s->file_fd = s->fd;
	s->fd = scratch_file();
	if (s->fd < 0)
		return s->fd;
	s->swap = swap;
	s->id = id;
	return 0;
}

#ifdef HAVE_ZSTD_SUPPORT
static size_t stream__compressed_header(void *record, size_t increment)
{
	struct perf_record_compressed *event = record;

	if (increment) {
		event->header.size += increment;
		return increment;
	}
	event->header.type = PERF_RECORD_COMPRESSED;
	event->header.size = sizeof(*event);
	return sizeof(*event);
}

/* Writes @len bytes of events at @buf to @fd compressed, as perf record -z. */
static int stream__write_compressed(struct zstd_data *zstd, int fd, void *buf, size_t len)
{
	size_t size = 2 * len + PERF_SAMPLE_MAX_SIZE;
	void *records = malloc(size);
	ssize_t n;

	if (!records)
		return -ENOMEM;
	n = zstd_compress_stream_to_records(zstd, records, size, buf, len,
					    PERF_SAMPLE_MAX_SIZE -
					    sizeof(struct perf_record_compressed) - 1,
					    stream__compressed_header);
	if (n < 0 || writen(fd, records, n) != n)
		n = -EIO;
	free(records);
	return n < 0 ? n : 0;
}

/*
 * The events at @data_fd, to a new scratch file returned: what comes
 * between the ends of rounds compressed, the ends of rounds as they are.
 */
static int stream__compress(int data_fd)
{
	off_t size = lseek(data_fd, 0, SEEK_END);
	int fd = scratch_file(), err = 0;
	struct zstd_data zstd;
	size_t chunk = 0, pos;
	void *data;

	if (fd < 0 || size <= 0)
		return fd < 0 ? fd : -EINVAL;
	data = mmap(NULL, size, PROT_READ, MAP_PRIVATE, data_fd, 0);
	if (data == MAP_FAILED || zstd_init(&zstd, 1)) {
		if (data != MAP_FAILED)
			munmap(data, size);
		close(fd);
		return -ENOMEM;
	}
	for (pos = 0; !err && pos < (size_t)size; ) {
		struct perf_event_header *header = data + pos;

		if (header->size < sizeof(*header)) {
			err = -EINVAL;
			break;
		}
		if (pos > chunk && (header->type == PERF_RECORD_FINISHED_ROUND ||
				    pos - chunk >= STREAM__COMP_MMAP_LEN / 2)) {
			err = stream__write_compressed(&zstd, fd, data + chunk, pos - chunk);
			chunk = pos;
		}
		if (!err && header->type == PERF_RECORD_FINISHED_ROUND) {
			if (writen(fd, header, header->size) != header->size)
				err = -EIO;
			chunk = pos + header->size;
		}
		pos += header->size;
	}
	if (!err && pos > chunk)
		err = stream__write_compressed(&zstd, fd, data + chunk, pos - chunk);
	zstd_fini(&zstd);
	munmap(data, size);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}
#else
static int stream__compress(int data_fd __maybe_unused)
{
	pr_err("perf was built without zstd: no compressed streams\n");
	return -ENOTSUP;
}
#endif

static int stream__file_end(struct stream *s, int err)
{
	int data_fd = s->fd;

	if (!err && s->failed)
		err = -EIO;
	if (!err && s->compress) {
		data_fd = stream__compress(s->fd);
		if (data_fd < 0)
			err = data_fd;
	}
	if (!err)
		err = stream__write_file(s, s->file_fd, data_fd, s->id);
	if (data_fd >= 0 && data_fd != s->fd)
		close(data_fd);
	close(s->fd);
	return err;
}

/*
 * perf record --threads writes the buffers of each of its threads' CPUs to
 * a file of its own: in a directory, a thread's events go to its file, as
 * if each thread ran on CPUs of its own.
 */
static void stream__to_file_of(struct stream *s, u32 tid)
{
	if (s->dir)
		s->fd = s->dir_fds[tid == TID1 ? 1 : 2];
}

/* Opens the scratch files of a directory's data files after stream__file_begin(). */
static int stream__dir_begin(struct stream *s)
{
	s->dir = true;
	s->dir_fds[0] = s->fd;
	for (int i = 1; i < 3; i++) {
		s->dir_fds[i] = scratch_file();
		if (s->dir_fds[i] < 0)
			return s->dir_fds[i];
	}
	return 0;
}

/* Copies all of @data_fd to a new file @name in the directory @dir_fd. */
static int stream__dir_file(int dir_fd, const char *name, int data_fd)
{
	int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int err;

	if (fd < 0)
		return -errno;
	err = copy_data(fd, data_fd);
	close(fd);
	return err;
}

/*
 * The events written since stream__dir_begin() as the perf.data directory
 * @path: the header and what went to no thread's file in "data" (with
 * HEADER_DIR_FORMAT), each thread's events in "data.N".
 */
static int stream__dir_end(struct stream *s, const char *path, int err)
{
	int dir_fd = -1;

	s->file_fd = -1;
	if (!err && s->failed)
		err = -EIO;
	/* perf record --threads -z: each thread compresses what it writes */
	for (int i = 0; !err && s->compress && i < 3; i++) {
		int fd = stream__compress(s->dir_fds[i]);

		if (fd < 0) {
			err = fd;
			break;
		}
		close(s->dir_fds[i]);
		s->dir_fds[i] = fd;
	}
	if (!err && mkdir(path, 0755) && errno != EEXIST)
		err = -errno;
	if (!err) {
		dir_fd = open(path, O_RDONLY | O_DIRECTORY);
		if (dir_fd < 0)
			err = -errno;
	}
	if (!err) {
		s->file_fd = openat(dir_fd, "data", O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (s->file_fd < 0)
			err = -errno;
	}
	if (!err)
		err = stream__write_file(s, s->file_fd, s->dir_fds[0], s->id);
	if (!err)
		err = stream__dir_file(dir_fd, "data.0", s->dir_fds[1]);
	if (!err)
		err = stream__dir_file(dir_fd, "data.1", s->dir_fds[2]);
	if (s->file_fd >= 0)
		close(s->file_fd);
	if (dir_fd >= 0)
		close(dir_fd);
	for (int i = 0; i < 3; i++) {
		if (s->dir_fds[i] >= 0)
			close(s->dir_fds[i]);
	}
	return err;
}

/* The rules' stream as a perf.data file, in the other byte order if @swap */
static int deferredstream__rules_file(struct stream *s, bool swap, u64 id)
{
	int err = stream__file_begin(s, swap, id);

	return err ?: stream__file_end(s, deferredstream__rules(s));
}

/*
 * AUX area data, as perf record writes it for Intel PT and the like: a
 * PERF_RECORD_AUXTRACE and then its data, which are no events. Here the
 * data look like a record of TID1 just after its first sample in
 * deferredstream__offcpu(), with another cookie: a reader that took them
 * for events would find that sample's record is not coming.
 */
static void stream__aux(struct stream *s)
{
	union perf_event buf, *record;
	struct perf_record_auxtrace aux = {
		.header = {
			.type = PERF_RECORD_AUXTRACE,
			.size = sizeof(aux),
		},
		.tid = TID1,
	};

	record = record__build(&buf, PID, TID1, 101, COOKIE2, &stack_a);
	if (!record) {
		s->failed = true;
		return;
	}
	aux.size = record->header.size;
	stream__write(s, &aux, sizeof(aux));
	stream__write(s, record, record->header.size);
}

static void stream__round(struct stream *s)
{
	struct perf_event_header round = {
		.type = PERF_RECORD_FINISHED_ROUND,
		.size = sizeof(round),
	};

	/* perf record --threads ends no round */
	if (s->dir)
		return;

	if (s->swap) {
		round.type = bswap_32(round.type);
		round.size = bswap_16(round.size);
	}
	stream__write(s, &round, sizeof(round));
}

/* Where the stacks of the streams below are: functions of perf itself */
static int stream__exe_threads(struct stream *s, u32 first_tid, u32 nr, const char *comm)
{
	u64 start = 0, len = 0, pgoff = 0;
	char path[PATH_MAX];

	if (exe__text_map(path, sizeof(path), &start, &len, &pgoff))
		return -ENOENT;
	stream__mmap2(s, 10, path, start, len, pgoff);
	for (u32 tid = first_tid; tid < first_tid + nr; tid++)
		stream__comm(s, tid, 20, comm);
	return 0;
}

#define BENCH_TID0	2001
#define BENCH_THREADS	8
#define BENCH_ROUND	64	/* samples */
#define BENCH_STACKS	3	/* of 8, 12 and 16 frames */
#define BENCH_DEPTH	16

/*
 * A recording of any size, for make bench-processing and the index's
 * memory: @nr samples of eight threads taking turns (eight CPUs), in
 * stays of one to four samples, each with six kernel frames and 8, 12 or
 * 16 user frames in functions all over perf's own text, as real programs'
 * stacks are; with @defer, each stay's record comes after its last
 * sample, else every sample has its whole stack, as fp writes it. A round
 * ends every 64 samples, as perf record writes them.
 */
static int deferredstream__bench(struct stream *s, unsigned long nr, bool defer)
{
	const struct ips kernel = IPS(CTX_K, KIP1, KIP2, KIP3, KIP1 + 0x100, KIP2 + 0x100,
				      KIP3 + 0x100);
	u64 frames[BENCH_STACKS][BENCH_DEPTH], start = 0, len = 0, pgoff = 0;
	struct ips stacks[BENCH_STACKS];
	struct {
		u64			cookie;
		unsigned int		left;
		const struct ips	*stack;
	} threads[BENCH_THREADS] = {};
	char path[PATH_MAX];
	u64 ips[MAX_IPS];
	int err;

	if (exe__text_map(path, sizeof(path), &start, &len, &pgoff))
		return -ENOENT;
	for (int i = 0; i < BENCH_STACKS; i++) {
		stacks[i] = (struct ips){ .nr = 8 + 4 * i, .ips = frames[i], };
		for (u64 j = 0; j < stacks[i].nr; j++)
			frames[i][j] = start + (j * 7919 + i * 104729) * 64 % len;
	}
	if (!defer)
		s->sample_type &= ~PERF_SAMPLE_CALLCHAIN_DEFERRED;
	err = stream__exe_threads(s, BENCH_TID0, BENCH_THREADS, "deferred-bench");
	for (unsigned long i = 0; !err && i < nr && !s->failed; i++) {
		unsigned long turn = i / BENCH_THREADS;
		u32 tid = BENCH_TID0 + i % BENCH_THREADS;
		u64 time = 100 + 10 * i;
		struct ips chain = { .ips = ips, };
		typeof(threads[0]) *t = &threads[i % BENCH_THREADS];

		if (!t->left) {
			t->cookie = (u64)(i % BENCH_THREADS + 1) << 32 | (turn + 1);
			t->left = 1 + turn % 4;
			t->stack = &stacks[turn % BENCH_STACKS];
		}
		if (defer) {
			stream__sample(s, tid, time, t->cookie, &kernel);
		} else {
			memcpy(ips, kernel.ips, kernel.nr * sizeof(u64));
			ips[kernel.nr] = CTX_U;
			memcpy(&ips[kernel.nr + 1], t->stack->ips, t->stack->nr * sizeof(u64));
			chain.nr = kernel.nr + 1 + t->stack->nr;
			stream__sample(s, tid, time, 0, &chain);
		}
		if (!--t->left && defer)
			stream__record(s, tid, time + 5, t->cookie, t->stack);
		if (i % BENCH_ROUND == BENCH_ROUND - 1)
			stream__round(s);
	}
	return err ?: s->failed ? -EIO : 0;
}

/*
 * Off-CPU: TID1 is sampled as it goes to sleep, and returns to user space
 * (its record) only after @nr stays of TID2 of ten samples each, rounds
 * between them. A pipe's queue holds all TID2's events behind TID1's
 * sample; a file's index holds only TID2's records in between.
 */
static int deferredstream__offcpu(struct stream *s, unsigned long nr)
{
	const u64 mid = (u64)(unsigned long)deferredstream_mid + 1;
	const u64 top = (u64)(unsigned long)deferredstream_top + 1;
	const struct ips stack = { 2, (const u64[]){ mid, top } };
	u64 time = 100;
	int err = stream__exe_threads(s, TID1, 2, "deferred-offcpu");

	stream__to_file_of(s, TID1);
	stream__sample(s, TID1, time++, COOKIE1, &kernel_a);
	stream__to_file_of(s, TID2);
	for (unsigned long i = 0; !err && i < nr && !s->failed; i++) {
		u64 cookie = (u64)2 << 32 | (i + 1);

		for (int j = 0; j < 10; j++)
			stream__sample(s, TID2, time++, cookie, &kernel_b);
		stream__record(s, TID2, time++, cookie, &stack);
		if (s->aux)
			stream__aux(s);
		stream__round(s);
	}
	stream__to_file_of(s, TID1);
	stream__record(s, TID1, time, COOKIE1, &stack);
	return err ?: s->failed ? -EIO : 0;
}

static int deferredstream__wait(struct stream *s, unsigned long nr, bool joined)
{
	stream__comm(s, TID1, 20, "deferred-wait");
	if (joined)
		stream__record(s, TID1, 99, COOKIE1, &stack_a);
	for (unsigned long i = 0; i < nr && !s->failed; i++) {
		stream__sample(s, TID1, 100 + i, COOKIE1, &kernel_a);
		/* rounds, as perf record writes them: the reader frees as it goes */
		if (i % 1000 == 999)
			stream__round(s);
	}
	if (!joined)
		stream__record(s, TID1, 100 + nr, COOKIE1, &stack_a);
	return s->failed ? -EIO : 0;
}

/*
 * perf sched's events as a 6.12 kernel describes them in tracefs, and the
 * tracing data that carries the descriptions: perf reads the raw fields of
 * the samples with them, no tracefs needed.
 */
#define SCHED_SWITCH_ID	316
#define SCHED_WAKEUP_ID	318
/* their events' ids in the streams */
#define SCHED_SWITCH_SAMPLE_ID	1
#define SCHED_WAKEUP_SAMPLE_ID	2

#define SCHED_COMMON_FIELDS							\
	"\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"	\
	"\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"	\
	"\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n" \
	"\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"

#define SCHED_TASK_STATES							\
	"((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | "	\
	"0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)"

#define SCHED_SWITCH_PRINT_FMT							\
	"print fmt: \"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> "	\
	"next_comm=%s next_pid=%d next_prio=%d\", REC->prev_comm, REC->prev_pid, "	\
	"REC->prev_prio, (REC->prev_state & " SCHED_TASK_STATES ") ? "		\
	"__print_flags(REC->prev_state & " SCHED_TASK_STATES ", \"|\", "		\
	"{ 0x00000001, \"S\" }, { 0x00000002, \"D\" }, { 0x00000004, \"T\" }, "	\
	"{ 0x00000008, \"t\" }, { 0x00000010, \"X\" }, { 0x00000020, \"Z\" }, "	\
	"{ 0x00000040, \"P\" }, { 0x00000080, \"I\" }) : \"R\", "			\
	"REC->prev_state & (" SCHED_TASK_STATES " + 1) ? \"+\" : \"\", "		\
	"REC->next_comm, REC->next_pid, REC->next_prio"

#define SCHED_WAKEUP_PRINT_FMT							\
	"print fmt: \"comm=%s pid=%d prio=%d target_cpu=%03d\", "			\
	"REC->comm, REC->pid, REC->prio, REC->target_cpu"

static const char sched_switch_format[] =
	"name: sched_switch\n"
	"ID: " __stringify(SCHED_SWITCH_ID) "\n"
	"format:\n"
	SCHED_COMMON_FIELDS
	"\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n"
	"\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n"
	"\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n"
	"\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n"
	"\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n"
	"\n"
	SCHED_SWITCH_PRINT_FMT "\n";

static const char sched_wakeup_format[] =
	"name: sched_wakeup\n"
	"ID: " __stringify(SCHED_WAKEUP_ID) "\n"
	"format:\n"
	SCHED_COMMON_FIELDS
	"\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n"
	"\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n"
	"\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n"
	"\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n"
	"\n"
	SCHED_WAKEUP_PRINT_FMT "\n";

static const char header_page_format[] =
	"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
	"\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n"
	"\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
	"\tfield: char data;\toffset:16;\tsize:4080;\tsigned:1;\n";

static const char header_event_format[] =
	"# compressed entry header\n"
	"\ttype_len    :    5 bits\n"
	"\ttime_delta  :   27 bits\n"
	"\tarray       :   32 bits\n";

/* The tracing data, as util/trace-event-read.c reads it. */
struct tracing_data_buf {
	char	data[8192];
	size_t	len;
	bool	failed;
};

static void tracing_data__put(struct tracing_data_buf *t, const void *p, size_t size)
{
	if (t->failed || size > sizeof(t->data) - t->len) {
		t->failed = true;
		return;
	}
	memcpy(t->data + t->len, p, size);
	t->len += size;
}

static void tracing_data__put_u32(struct tracing_data_buf *t, u32 val)
{
	tracing_data__put(t, &val, sizeof(val));
}

static void tracing_data__put_u64(struct tracing_data_buf *t, u64 val)
{
	tracing_data__put(t, &val, sizeof(val));
}

/* A file: its size, then its text */
static void tracing_data__put_file(struct tracing_data_buf *t, const char *text)
{
	tracing_data__put_u64(t, strlen(text));
	tracing_data__put(t, text, strlen(text));
}

static struct tracing_data_buf *tracing_data__new(void)
{
	static const char magic[] = { 23, 8, 68, 't', 'r', 'a', 'c', 'i', 'n', 'g' };
	const u16 one = 1;
	const u8 big_endian = *(const u8 *)&one == 0, long_size = sizeof(long);
	struct tracing_data_buf *t = zalloc(sizeof(*t));

	if (!t)
		return NULL;
	tracing_data__put(t, magic, sizeof(magic));
	tracing_data__put(t, "0.6", sizeof("0.6"));
	tracing_data__put(t, &big_endian, 1);
	tracing_data__put(t, &long_size, 1);
	tracing_data__put_u32(t, 4096);
	tracing_data__put(t, "header_page", sizeof("header_page"));
	tracing_data__put_file(t, header_page_format);
	tracing_data__put(t, "header_event", sizeof("header_event"));
	tracing_data__put_file(t, header_event_format);
	/* no ftrace events; one system of two events */
	tracing_data__put_u32(t, 0);
	tracing_data__put_u32(t, 1);
	tracing_data__put(t, "sched", sizeof("sched"));
	tracing_data__put_u32(t, 2);
	tracing_data__put_file(t, sched_switch_format);
	tracing_data__put_file(t, sched_wakeup_format);
	/* no kallsyms, no printk formats, no saved cmdlines */
	tracing_data__put_u32(t, 0);
	tracing_data__put_u32(t, 0);
	tracing_data__put_u64(t, 0);
	if (t->failed)
		zfree(&t);
	return t;
}

/* A pipe's tracing data: an event, the data after it, padded to whole u64s */
static void stream__tracing_data(struct stream *s, const struct tracing_data_buf *t)
{
	struct perf_record_header_tracing_data ev = {
		.header = {
			.type = PERF_RECORD_HEADER_TRACING_DATA,
			.size = sizeof(ev),
		},
		.size = PERF_ALIGN(t->len, sizeof(u64)),
	};
	u64 padding = 0;

	stream__write(s, &ev, sizeof(ev));
	stream__write(s, t->data, t->len);
	stream__write(s, &padding, ev.size - t->len);
}

/*
 * A perf.data file on @fd, as perf record writes one (util/header.c): the
 * header, the events' ids and attrs, the events in @data_fd, then two
 * features: the tracing data and the number of CPUs.
 */
static int sched__write_file(int fd, u64 sample_type, int data_fd,
			     const struct tracing_data_buf *t)
{
	static const u64 ids[] = { SCHED_SWITCH_SAMPLE_ID, SCHED_WAKEUP_SAMPLE_ID };
	static const u64 configs[] = { SCHED_SWITCH_ID, SCHED_WAKEUP_ID };
	struct perf_file_header header = {
		.magic		= PERF_MAGIC2,
		.size		= sizeof(header),
		.attr_size	= sizeof(struct file_attr),
	};
	/* available and online */
	static const u32 nr_cpus[] = { 2, 2 };
	struct file_attr attrs[ARRAY_SIZE(ids)];
	struct perf_file_section features[2];
	off_t data_size = lseek(data_fd, 0, SEEK_END);
	u64 offset = sizeof(header);

	if (data_size < 0)
		return -errno;
	memset(attrs, 0, sizeof(attrs));
	for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
		event_attr__init(&attrs[i].attr, PERF_TYPE_TRACEPOINT, configs[i], 1,
				 sample_type, 0);
		attrs[i].ids.offset = offset + i * sizeof(ids[0]);
		attrs[i].ids.size = sizeof(ids[0]);
	}
	offset += sizeof(ids);
	header.attrs.offset = offset;
	header.attrs.size = sizeof(attrs);
	offset += sizeof(attrs);
	header.data.offset = offset;
	header.data.size = data_size;
	offset += data_size;
	/* the features' sections follow the data, in the order of their bits */
	__set_bit(HEADER_TRACING_DATA, header.adds_features);
	__set_bit(HEADER_NRCPUS, header.adds_features);
	features[0].offset = offset + sizeof(features);
	features[0].size = t->len;
	features[1].offset = features[0].offset + features[0].size;
	features[1].size = sizeof(nr_cpus);

	if (writen(fd, &header, sizeof(header)) != sizeof(header) ||
	    writen(fd, ids, sizeof(ids)) != sizeof(ids) ||
	    writen(fd, attrs, sizeof(attrs)) != sizeof(attrs))
		return -EIO;
	if (copy_data(fd, data_fd) ||
	    writen(fd, features, sizeof(features)) != sizeof(features) ||
	    writen(fd, t->data, t->len) != (ssize_t)t->len ||
	    writen(fd, nr_cpus, sizeof(nr_cpus)) != sizeof(nr_cpus))
		return -EIO;
	return 0;
}

/* The raw data of sched_switch and sched_wakeup, as tracefs describes them */
struct sched_raw_common {
	u16	type;
	u8	flags;
	u8	preempt_count;
	s32	pid;
};

struct sched_switch_raw {
	struct sched_raw_common	common;
	char			prev_comm[16];
	s32			prev_pid;
	s32			prev_prio;
	s64			prev_state;
	char			next_comm[16];
	s32			next_pid;
	s32			next_prio;
};

struct sched_wakeup_raw {
	struct sched_raw_common	common;
	char			comm[16];
	s32			pid;
	s32			prio;
	s32			target_cpu;
};

struct sched_task {
	u32		pid, tid;
	const char	*comm;
};

#define TASK_RUNNING		0
#define TASK_INTERRUPTIBLE	1

static const struct sched_task task_a = { PID, TID1, "task-a" };
static const struct sched_task task_b = { PID, TID2, "task-b" };
static const struct sched_task task_c = { PID, TID3, "task-c" };
static const struct sched_task swapper = { 0, 0, "swapper/0" };

/*
 * What the kernel did, in time order: a switch or a wakeup sampled in the
 * context of @task, a record of its stack written when @task returned to
 * user space, or a loss.
 */
struct sched_step {
	enum { STEP_SWITCH, STEP_WAKEUP, STEP_RECORD, STEP_LOST } what;
	u64			ms;
	u32			cpu;
	const struct sched_task	*task;
	u64			cookie;
	const struct ips	*chain;	/* a sample's kernel part, a record's stack */
	/* a switch: from @task, in @prev_state, to @next; a wakeup: of @next */
	s64			prev_state;
	const struct sched_task	*next;
};

#define SCHED_SAMPLE_TYPE	(PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | \
				 PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | \
				 PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW | \
				 PERF_SAMPLE_CALLCHAIN_DEFERRED)

static u64 sched__time(u64 ms)
{
	return NSEC_PER_SEC + ms * NSEC_PER_MSEC;
}

/*
 * A sample of a step. In the fp stream, what deferral would have joined:
 * the user part of the stack that its record has, if it has one.
 */
static void stream__sched_sample(struct stream *s, const struct sched_step *steps,
				 size_t nr_steps, const struct sched_step *step, bool defer)
{
	union {
		struct sched_switch_raw	sw;
		struct sched_wakeup_raw	wakeup;
		u64			words[9];
	} raw;
	struct perf_sample sample = {
		.tid	= step->task->tid,
		.time	= sched__time(step->ms),
		.cpu	= step->cpu,
		.period	= 1,
		.raw_data = &raw,
	};
	u64 ips[MAX_IPS];
	struct ips chain = *step->chain;
	union perf_event buf;

	memset(&raw, 0, sizeof(raw));
	raw.sw.common.pid = step->task->tid;
	if (step->what == STEP_SWITCH) {
		raw.sw.common.type = SCHED_SWITCH_ID;
		snprintf(raw.sw.prev_comm, sizeof(raw.sw.prev_comm), "%s", step->task->comm);
		raw.sw.prev_pid = step->task->tid;
		raw.sw.prev_prio = 120;
		raw.sw.prev_state = step->prev_state;
		snprintf(raw.sw.next_comm, sizeof(raw.sw.next_comm), "%s", step->next->comm);
		raw.sw.next_pid = step->next->tid;
		raw.sw.next_prio = 120;
		/* the u32 size and the data fill whole u64s */
		sample.raw_size = sizeof(raw.sw) + sizeof(u32);
		sample.id = SCHED_SWITCH_SAMPLE_ID;
	} else {
		raw.wakeup.common.type = SCHED_WAKEUP_ID;
		snprintf(raw.wakeup.comm, sizeof(raw.wakeup.comm), "%s", step->next->comm);
		raw.wakeup.pid = step->next->tid;
		raw.wakeup.prio = 120;
		raw.wakeup.target_cpu = step->cpu;
		sample.raw_size = sizeof(raw.wakeup);
		sample.id = SCHED_WAKEUP_SAMPLE_ID;
	}

	if (defer) {
		sample.deferred_cookie = step->cookie;
	} else if (step->cookie) {
		for (size_t i = 0; i < nr_steps; i++) {
			const struct sched_step *record = &steps[i];

			if (record->what != STEP_RECORD || record->task != step->task ||
			    record->cookie != step->cookie || !record->chain->nr)
				continue;
			if (chain.nr + 1 + record->chain->nr > MAX_IPS) {
				s->failed = true;
				return;
			}
			memcpy(ips, chain.ips, chain.nr * sizeof(u64));
			ips[chain.nr] = PERF_CONTEXT_USER;
			memcpy(&ips[chain.nr + 1], record->chain->ips,
			       record->chain->nr * sizeof(u64));
			chain.nr += 1 + record->chain->nr;
			chain.ips = ips;
			break;
		}
	}
	stream__put(s, sample__synthesize_pid(&buf, s->sample_type, 0, &sample, &chain,
					      step->task->pid));
}

/*
 * Three tasks on two CPUs, switched and woken: each sample of a task in
 * the kernel waits for the record its return to user space writes, while
 * the other tasks switch meanwhile, on its CPU and on the other. Joined
 * late, a switch comes after a later one of its CPU, as perf sched cannot
 * take. One record comes from the other CPU's buffer; one sample's record
 * comes across a loss (ambiguous), one never comes (unresolved). With
 * @defer false, the same events recorded with plain fp callchains.
 */
static int deferredstream__sched(struct stream *s, bool defer, bool file)
{
	const u64 leaf = (u64)(unsigned long)deferredstream_leaf + 1;
	const u64 mid = (u64)(unsigned long)deferredstream_mid + 1;
	const u64 top = (u64)(unsigned long)deferredstream_top + 1;
	const struct ips stack_deep = { 3, (const u64[]){ leaf, mid, top } };
	const struct ips stack_short = { 2, (const u64[]){ mid, top } };
	const struct sched_step steps[] = {
		{ STEP_SWITCH, 10, 0, &task_a, COOKIE1, &kernel_a, TASK_INTERRUPTIBLE, &task_b },
		{ STEP_WAKEUP, 12, 1, &task_c, COOKIE3, &kernel_b, 0, &task_a },
		{ STEP_RECORD, 13, 1, &task_c, COOKIE3, &stack_short, 0, NULL },
		/* B is preempted in the kernel: A runs again */
		{ STEP_SWITCH, 15, 0, &task_b, COOKIE2, &kernel_c, TASK_RUNNING, &task_a },
		/* A's sample at 10 joins its record now, after B's switch at 15 */
		{ STEP_RECORD, 16, 0, &task_a, COOKIE1, &stack_deep, 0, NULL },
		{ STEP_LOST, 17, 0, NULL, 0, NULL, 0, NULL },
		{ STEP_SWITCH, 20, 1, &task_c, COOKIE5, &kernel_a, TASK_INTERRUPTIBLE, &task_b },
		/* B's record, on the CPU B moved to, after the loss: ambiguous */
		{ STEP_RECORD, 21, 1, &task_b, COOKIE2, &stack_deep, 0, NULL },
		/* A sleeps for good: unresolved */
		{ STEP_SWITCH, 25, 0, &task_a, COOKIE4, &kernel_a, TASK_INTERRUPTIBLE, &swapper },
		/* the idle task defers nothing */
		{ STEP_WAKEUP, 30, 0, &swapper, 0, &kernel_b, 0, &task_c },
		{ STEP_SWITCH, 32, 0, &swapper, 0, &kernel_c, TASK_RUNNING, &task_c },
		{ STEP_RECORD, 33, 0, &task_c, COOKIE5, &stack_short, 0, NULL },
	};
	struct perf_pipe_file_header header = {
		.magic	= PERF_MAGIC2,
		.size	= sizeof(header),
	};
	int out_fd = s->fd, err = -EIO;
	struct tracing_data_buf *t;
	char path[PATH_MAX];
	u64 start = 0, len = 0, pgoff = 0;

	if (exe__text_map(path, sizeof(path), &start, &len, &pgoff))
		return -ENOENT;
	t = tracing_data__new();
	if (!t)
		return -ENOMEM;
	s->sample_type = defer ? SCHED_SAMPLE_TYPE :
				 SCHED_SAMPLE_TYPE & ~PERF_SAMPLE_CALLCHAIN_DEFERRED;
	if (file) {
		/* the events first, aside: the header says where they end */
		s->fd = scratch_file();
		if (s->fd < 0) {
			err = s->fd;
			goto out_free;
		}
	} else {
		stream__write(s, &header, sizeof(header));
		stream__attr_event(s, PERF_TYPE_TRACEPOINT, SCHED_SWITCH_ID, 1, 0,
				   SCHED_SWITCH_SAMPLE_ID);
		stream__attr_event(s, PERF_TYPE_TRACEPOINT, SCHED_WAKEUP_ID, 1, 0,
				   SCHED_WAKEUP_SAMPLE_ID);
		stream__tracing_data(s, t);
	}

	s->id = SCHED_SWITCH_SAMPLE_ID;
	stream__mmap2(s, sched__time(1), path, start, len, pgoff);
	stream__comm(s, task_a.tid, sched__time(1), task_a.comm);
	stream__comm(s, task_b.tid, sched__time(1), task_b.comm);
	stream__comm(s, task_c.tid, sched__time(1), task_c.comm);

	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		const struct sched_step *step = &steps[i];

		s->cpu = step->cpu;
		switch (step->what) {
		case STEP_SWITCH:
		case STEP_WAKEUP:
			stream__sched_sample(s, steps, ARRAY_SIZE(steps), step, defer);
			break;
		case STEP_RECORD:
			if (defer)
				stream__record(s, step->task->tid, sched__time(step->ms),
					       step->cookie, step->chain);
			break;
		case STEP_LOST:
			stream__lost(s, sched__time(step->ms), 2);
			break;
		default:
			s->failed = true;
			break;
		}
	}
	if (!s->failed)
		err = file ? sched__write_file(out_fd, s->sample_type, s->fd, t) : 0;
	if (file)
		close(s->fd);
out_free:
	free(t);
	return err;
}

static int deferredstream(int argc, const char **argv)
{
	static const u64 id = 1;
	struct stream s = {
		.fd = STDOUT_FILENO,
		.sample_type = SAMPLE_TYPE,
	};
	struct perf_pipe_file_header header = {
		.magic	= PERF_MAGIC2,
		.size	= sizeof(header),
	};
	const char *mode = argc > 0 ? argv[0] : "";
	unsigned long nr = argc > 1 ? strtoul(argv[1], NULL, 0) : 0;

	if (!strcmp(mode, "sched") || !strcmp(mode, "sched-fp")) {
		bool file = argc > 1 && !strcmp(argv[1], "file");

		return deferredstream__sched(&s, /*defer=*/!strcmp(mode, "sched"), file) ? 1 : 0;
	}
	if (!strcmp(mode, "bench") && argc > 2) {
		bool defer = !strcmp(argv[2], "defer");

		if (!defer && strcmp(argv[2], "fp"))
			goto usage;
		if (stream__file_begin(&s, /*swap=*/false, id))
			return 1;
		return stream__file_end(&s, deferredstream__bench(&s, nr, defer)) ? 1 : 0;
	}
	if (!strcmp(mode, "offcpu") && argc > 3 &&
	    (!strcmp(argv[2], "dir") || !strcmp(argv[2], "compressed-dir"))) {
		int err;

		s.compress = !strcmp(argv[2], "compressed-dir");
		for (int i = 0; i < 3; i++)
			s.dir_fds[i] = -1;
		err = stream__file_begin(&s, /*swap=*/false, id);
		err = err ?: stream__dir_begin(&s);
		err = err ?: deferredstream__offcpu(&s, nr);
		return stream__dir_end(&s, argv[3], err) ? 1 : 0;
	}
	if (!strcmp(mode, "offcpu") && argc > 2) {
		bool swap = !strcmp(argv[2], "swapped-file");
		bool tracing = !strcmp(argv[2], "tracing-file");
		int err;

		s.compress = !strcmp(argv[2], "compressed-file");
		s.aux = !strcmp(argv[2], "aux-file") || tracing;
		if (!swap && !s.compress && !s.aux && strcmp(argv[2], "file"))
			goto usage;
		if (stream__file_begin(&s, swap, id))
			return 1;
		if (tracing) {
			struct tracing_data_buf *t = tracing_data__new();

			if (t)
				stream__tracing_data(&s, t);
			else
				s.failed = true;
			free(t);
		}
		err = deferredstream__offcpu(&s, nr);
		return stream__file_end(&s, err) ? 1 : 0;
	}
	if (!strcmp(mode, "rules") && argc > 1) {
		bool swap = !strcmp(argv[1], "swapped-file");

		if (!swap && strcmp(argv[1], "file"))
			goto usage;
		return deferredstream__rules_file(&s, swap, id) ? 1 : 0;
	}
	stream__write(&s, &header, sizeof(header));

	/* as perf record --per-thread writes them: no time */
	if (!strcmp(mode, "views-notime"))
		s.sample_type &= ~PERF_SAMPLE_TIME;
	/* as a Linux 6.19 kernel writes them */
	if (!strcmp(mode, "views-mainline")) {
		s.mainline = true;
		s.sample_type &= ~PERF_SAMPLE_CALLCHAIN_DEFERRED;
	}
	stream__attr(&s, /*read_format=*/0, id);
	if (!strcmp(mode, "views") || !strcmp(mode, "views-notime") ||
	    !strcmp(mode, "views-mainline"))
		return deferredstream__views(&s) ? 1 : 0;
	if (!strcmp(mode, "wait") || !strcmp(mode, "joined"))
		return deferredstream__wait(&s, nr, !strcmp(mode, "joined")) ? 1 : 0;
	if (!strcmp(mode, "rules"))
		return deferredstream__rules(&s) ? 1 : 0;
	if (!strcmp(mode, "offcpu"))
		return deferredstream__offcpu(&s, nr) ? 1 : 0;
usage:
	fprintf(stderr, "usage: perf test -w %s %s\n", __func__,
		"views|views-notime|views-mainline|wait N|joined N|rules [file|swapped-file]|sched [file]|sched-fp [file]|bench N fp|defer|offcpu N [file|swapped-file|compressed-file|aux-file|tracing-file|dir DIR|compressed-dir DIR]");
	return 1;
}

DEFINE_WORKLOAD(deferredstream);
