/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the PERF_SAMPLE_CALLCHAIN_DEFERRED selftests and the stress
 * program: a system call made without a libc frame, the attrs they sample
 * with, small helpers around deferred_ring.h, and what they read of /proc,
 * tracefs and /dev/zero. Include after kselftest_harness.h and
 * deferred_ring.h.
 */
#ifndef DEFERRED_UTIL_H
#define DEFERRED_UTIL_H

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*
 * A system call made right here, without a libc frame. The user IP at
 * kernel entry, the instruction after "syscall" (int $0x80 in the 32-bit
 * build), is stored in "where" before entering, so that it is known also
 * for a call that never returns.
 */
#ifdef __x86_64__
#define raw_syscall(where, nr, a0, a1, a2, a3, a4, a5) ({		\
	register long __r10 asm("r10") = (long)(a3);			\
	register long __r8 asm("r8") = (long)(a4);			\
	register long __r9 asm("r9") = (long)(a5);			\
	long __ret;							\
									\
	asm volatile("lea 1f(%%rip), %%rcx\n\t"				\
		     "mov %%rcx, %1\n\t"				\
		     "syscall\n"					\
		     "1:"						\
		     : "=a" (__ret), "=m" (where)			\
		     : "0" ((long)(nr)), "D" ((long)(a0)),		\
		       "S" ((long)(a1)), "d" ((long)(a2)),		\
		       "r" (__r10), "r" (__r8), "r" (__r9)		\
		     : "rcx", "r11", "memory");				\
	__ret;								\
})
#else
/*
 * i386 (the _32 build): the arguments go in ebx, ecx, edx, esi and edi. The
 * sixth would go in ebp, the frame pointer that the walks under test start
 * from: it is not passed, and must be 0 (the one call here with six
 * arguments gives 0 for one that the kernel ignores). Position-independent
 * code has no absolute address of the label: a call gives it, and eax,
 * holding &where until then, takes nr.
 */
#define raw_syscall(where, nr, a0, a1, a2, a3, a4, a5) ({		\
	long __ret;							\
									\
	(void)sizeof(struct { int:(-!!(a5)); });			\
	asm volatile("push %%ebx\n\t"					\
		     "call 2f\n"					\
		     "2:\tpop %%ebx\n\t"				\
		     "add $1f-2b, %%ebx\n\t"				\
		     "mov %%ebx, (%%eax)\n\t"				\
		     "pop %%ebx\n\t"					\
		     "mov %[n], %%eax\n\t"				\
		     "int $0x80\n"					\
		     "1:"						\
		     : "=a" (__ret)					\
		     : "0" (&(where)), [n] "i" ((long)(nr)),		\
		       "b" ((long)(a0)), "c" ((long)(a1)),		\
		       "d" ((long)(a2)), "S" ((long)(a3)),		\
		       "D" ((long)(a4))					\
		     : "memory");					\
	__ret;								\
})
#endif

static inline pid_t gettid_(void)
{
	return syscall(SYS_gettid);
}

static inline bool has_user_context(const struct ring_record *rr)
{
	__u64 i;

	for (i = 0; i < rr->nr; i++)
		if (rr->ips[i] == PERF_CONTEXT_USER)
			return true;
	return false;
}

static inline bool taken_in_user_mode(const struct ring_record *s)
{
	return (s->misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_USER;
}

static inline bool taken_in_kernel_mode(const struct ring_record *s)
{
	return (s->misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL;
}

/*
 * The user ips of a sample taken in user mode, which is never deferred:
 * its callchain is PERF_CONTEXT_USER and the user stack walked in place,
 * with no kernel part (the sample interrupted no kernel code). NULL when
 * the callchain has another shape; *nr: the number of user ips.
 */
static inline const __u64 *user_mode_walk(const struct ring_record *s, __u64 *nr)
{
	*nr = 0;
	if (!s->nr || s->ips[0] != PERF_CONTEXT_USER)
		return NULL;
	*nr = s->nr - 1;
	return &s->ips[1];
}

/*
 * The user frames of a sample walked in place, after PERF_CONTEXT_USER
 * wherever it stands (a kernel part may come first). False, *ips NULL and
 * *nr 0 when there is none.
 */
static inline bool inline_user_part(const struct ring_record *s, const __u64 **ips,
				    __u64 *nr)
{
	__u64 k;

	for (k = 0; k < s->nr; k++) {
		if (s->ips[k] != PERF_CONTEXT_USER)
			continue;
		*ips = &s->ips[k + 1];
		*nr = s->nr - k - 1;
		return true;
	}
	*ips = NULL;
	*nr = 0;
	return false;
}

/*
 * An event of @type and @config that samples every @period with the ip,
 * tid, time and callchain of each sample, and the fields of @more_fields
 * (PERF_SAMPLE_CALLCHAIN_DEFERRED among them for a deferred user part);
 * sample_id_all on; opened disabled.
 */
static inline struct perf_event_attr sample_attr(__u32 type, __u64 config,
						 __u64 period, __u64 more_fields)
{
	struct perf_event_attr attr = {
		.size		= sizeof(attr),
		.type		= type,
		.config		= config,
		.sample_period	= period,
		.sample_type	= PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP |
				  PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
				  PERF_SAMPLE_CALLCHAIN | more_fields,
		.sample_id_all	= 1,
		.disabled	= 1,
	};

	return attr;
}

/*
 * A software event that samples every @period (ns for the clocks) with
 * the ip, tid, time, cpu and callchain of each sample, its user part
 * deferred when @deferred, sample_id_all on; opened disabled.
 */
static inline struct perf_event_attr sw_sample_attr(__u64 config, __u64 period,
						    bool deferred)
{
	return sample_attr(PERF_TYPE_SOFTWARE, config, period, PERF_SAMPLE_CPU |
			   (deferred ? PERF_SAMPLE_CALLCHAIN_DEFERRED : 0));
}

static inline const char *cookie_problem(__u64 cookie)
{
	__u32 cpu1 = (__u32)cookie;
	long cpus = sysconf(_SC_NPROCESSORS_CONF);

	if (cpu1 < 1 || cpu1 > cpus)
		return "bits 0..31 are not cpu+1 of a CPU of this machine";
	if (!((cookie >> 32) & 1))
		return "bits 32..63 are not odd";
	return NULL;
}

static inline void open_ring(struct __test_metadata *_metadata, struct ring *r,
			     struct perf_event_attr *attr, pid_t pid, int cpu,
			     size_t pages)
{
	int fd = perf_open(attr, pid, cpu);

	ASSERT_LE(0, fd) TH_LOG("perf_event_open(pid %d, cpu %d): %s",
				pid, cpu, strerror(errno));
	ASSERT_EQ(0, ring_map(r, fd, attr, pages))
		TH_LOG("mmap of %zu data pages: %s", pages, strerror(errno));
}

static inline void close_ring(struct ring *r)
{
	int fd = r->fd;

	ring_unmap(r);
	close(fd);
}

/* The lost count of an event opened with read_format PERF_FORMAT_LOST. */
static inline __u64 lost_count(int fd)
{
	__u64 v[2] = { 0, 0 };

	if (read(fd, v, sizeof(v)) != sizeof(v))
		return 0;
	return v[1];
}

/*
 * The cookie of the last sample of tid in the buffer, 0 if none: that of
 * the stay sampling stopped in. 0 too when that sample was taken in user
 * mode, walked in place: then no stay was under way.
 */
static inline __u64 last_cookie(const struct ring *r, pid_t tid)
{
	size_t i;

	for (i = r->nr_rec; i-- > 0;) {
		if (r->rec[i].type == PERF_RECORD_SAMPLE &&
		    r->rec[i].tid == (__u32)tid)
			return r->rec[i].cookie;
	}
	return 0;
}

/* The records that carry cookie; *first: the index of the first. */
static inline int records_of_cookie(const struct ring *r, __u64 cookie, size_t *first)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++) {
		if (r->rec[i].type != PERF_RECORD_CALLCHAIN_DEFERRED ||
		    r->rec[i].cookie != cookie)
			continue;
		if (!n++)
			*first = i;
	}
	return n;
}

/*
 * Whether child is done: it exited, or it was killed for running past
 * @deadline (ring_now() time). *status: its wait status then.
 */
static inline bool child_done(pid_t child, double deadline, int *status)
{
	if (waitpid(child, status, WNOHANG) == child)
		return true;
	if (ring_now() <= deadline)
		return false;
	kill(child, SIGKILL);
	waitpid(child, status, 0);
	return true;
}

/* The number in the file at path (a sysctl, a tracepoint id), -1 if none. */
static inline long long read_number(const char *path)
{
	long long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* The tracefs mount; mounted at /sys/kernel/tracing when there is none. */
static inline const char *tracefs_root(void)
{
	static const char * const roots[] = {
		"/sys/kernel/tracing", "/sys/kernel/debug/tracing",
	};
	char path[64];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(roots); i++) {
		snprintf(path, sizeof(path), "%s/events", roots[i]);
		if (!access(path, F_OK))
			return roots[i];
	}
	if (mount("tracefs", roots[0], "tracefs", 0, NULL))
		return NULL;
	snprintf(path, sizeof(path), "%s/events", roots[0]);
	return access(path, F_OK) ? NULL : roots[0];
}

/* A number from /proc/self/task/<tid>/status, -1 if there is none. */
static inline long task_status(pid_t tid, const char *key)
{
	char path[64], line[128];
	size_t len = strlen(key);
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, len) && line[len] == ':') {
			v = strtol(line + len + 1, NULL, 10);
			break;
		}
	}
	fclose(f);
	return v;
}

static inline long voluntary_switches(pid_t tid)
{
	return task_status(tid, "voluntary_ctxt_switches");
}

/* Wait until tid has blocked more than "seen" times; false on timeout. */
static inline bool wait_blocked(pid_t tid, long seen)
{
	double deadline = ring_now() + 5;

	while (voluntary_switches(tid) <= seen) {
		if (ring_now() > deadline)
			return false;
		usleep(1000);
	}
	return true;
}

/*
 * Open /dev/zero into *fd with a buffer of chunk bytes, touched so that
 * no page faults come while sampled; returns the time in s one read of
 * it takes, to size the readv() of a long kernel stay.
 */
static inline double zero_open(struct __test_metadata *_metadata, int *fd, char **buf,
			       size_t chunk)
{
	double t;

	*fd = open("/dev/zero", O_RDONLY);
	ASSERT_LE(0, *fd) TH_LOG("/dev/zero: %s", strerror(errno));
	*buf = malloc(chunk);
	ASSERT_FALSE(!*buf);
	memset(*buf, 1, chunk);
	ASSERT_EQ((ssize_t)chunk, read(*fd, *buf, chunk))
		TH_LOG("read of /dev/zero: %s", strerror(errno));
	t = ring_now();
	ASSERT_EQ((ssize_t)chunk, read(*fd, *buf, chunk))
		TH_LOG("read of /dev/zero: %s", strerror(errno));
	return ring_now() - t;
}

#endif /* DEFERRED_UTIL_H */
