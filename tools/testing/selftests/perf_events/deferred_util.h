/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Shared by the PERF_SAMPLE_CALLCHAIN_DEFERRED selftests: a system call
 * made without a libc frame, and small helpers around deferred_ring.h.
 * Include after kselftest_harness.h and deferred_ring.h.
 */
#ifndef DEFERRED_UTIL_H
#define DEFERRED_UTIL_H

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
 * A software event that samples every @period (ns for the clocks) with
 * the ip, tid, time, cpu and callchain of each sample, its user part
 * deferred when @deferred, sample_id_all on; opened disabled.
 */
static inline struct perf_event_attr sw_sample_attr(__u64 config, __u64 period,
						    bool deferred)
{
	struct perf_event_attr attr = {
		.size		= sizeof(attr),
		.type		= PERF_TYPE_SOFTWARE,
		.config		= config,
		.sample_period	= period,
		.sample_type	= PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP |
				  PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
				  PERF_SAMPLE_CPU | PERF_SAMPLE_CALLCHAIN,
		.sample_id_all	= 1,
		.disabled	= 1,
	};

	if (deferred)
		attr.sample_type |= PERF_SAMPLE_CALLCHAIN_DEFERRED;
	return attr;
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

#endif /* DEFERRED_UTIL_H */
