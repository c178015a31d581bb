// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED: no self-interrupt per deferred sample. A
 * sample taken in a system call by an interrupt (not an NMI) costs no
 * self-interrupt (the IWI line of /proc/interrupts): the system call's exit
 * runs the deferred work. A sample taken in user mode defers nothing: its
 * user stack is walked in place.
 *
 * Build with frame pointers and no sibling calls (see Makefile). Built
 * 64-bit, and 32-bit as deferred_self_interrupt_32, a compat task. Pointers
 * are checked as truth values (ASSERT_FALSE(!p)): the harness would print
 * them as 64-bit integers.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/ioctl.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_spin.h"
#include "deferred_iwi.h"
#include "deferred_progress.h"

/* no_self_interrupt_per_deferred_sample */
#define IWI_PERIOD_NS		100000
#define IWI_CPU_SECONDS		1.0
#define IWI_WALL_SECONDS	5.0
#define IWI_DATA_PAGES		256
#define IWI_SPIN_SECONDS	0.00005
#define IWI_READ		(64 << 10)
#define IWI_MIN_DEFERRED	100
#define IWI_MIN_WALKS		50
/*
 * Extra IWIs per walk (a record: the first request of a stay queues it)
 * < 0.1; raising one for every queued walk made it 1.
 */
#define IWI_MAX_PER_10_WALKS	1

static double thread_cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * no_self_interrupt_per_deferred_sample: a thread spins in user mode and
 * reads /dev/zero, sampled by task-clock; the IWIs of the whole machine
 * during a deferred run minus those of a plain run are the self-interrupts
 * that deferral cost. The samples in read() are deferred; those of the
 * spin, taken in user mode, are walked in place in both runs.
 */
struct iwi_result {
	long long iwi;
	double cpu;
	struct ring_stats st;
};

static void iwi_run(struct __test_metadata *_metadata, bool deferred,
		    unsigned long loops, struct iwi_result *res)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_TASK_CLOCK, deferred,
						 IWI_PERIOD_NS);
	long long before, after;
	double cpu0, wall;
	struct ring r;
	char *buf;
	int fd, i;

	buf = malloc(IWI_READ);
	ASSERT_FALSE(!buf);
	memset(buf, 1, IWI_READ);
	fd = open("/dev/zero", O_RDONLY);
	ASSERT_LE(0, fd) TH_LOG("/dev/zero: %s", strerror(errno));

	/* Perf's own wakeups use irq_work too: one per full buffer. */
	attr.watermark = 1;
	attr.wakeup_watermark = IWI_DATA_PAGES * sysconf(_SC_PAGESIZE);
	open_ring(_metadata, &r, &attr, 0, -1, IWI_DATA_PAGES);

	before = iwi_count();
	ASSERT_LE(0, before) TH_LOG("no IWI line in /proc/interrupts");
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0))
		TH_LOG("PERF_EVENT_IOC_ENABLE: %s", strerror(errno));
	cpu0 = thread_cpu_seconds();
	wall = ring_now() + IWI_WALL_SECONDS;
	for (i = 1;; i++) {
		spin_user(loops);
		ASSERT_EQ(IWI_READ, read(fd, buf, IWI_READ))
			TH_LOG("read of /dev/zero: %s", strerror(errno));
		if (i % 16)
			continue;
		ring_drain(&r);
		res->cpu = thread_cpu_seconds() - cpu0;
		if (res->cpu >= IWI_CPU_SECONDS || ring_now() > wall)
			break;
	}
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0))
		TH_LOG("PERF_EVENT_IOC_DISABLE: %s", strerror(errno));
	after = iwi_count();
	ring_drain(&r);
	EXPECT_EQ(0, r.nr_malformed)
		TH_LOG("expected well-formed records, saw %s", r.why);
	res->iwi = after - before;
	analyze_ring(_metadata, &r, gettid_(), &res->st);

	close_ring(&r);
	close(fd);
	free(buf);
}

TEST(no_self_interrupt_per_deferred_sample)
{
	struct iwi_result plain = { 0 }, deferred = { 0 };
	unsigned long loops;
	long long extra;

	if (iwi_count() < 0)
		SKIP(return, "no IWI line in /proc/interrupts");

	loops = spin_loops(IWI_SPIN_SECONDS);
	iwi_run(_metadata, false, loops, &plain);
	iwi_run(_metadata, true, loops, &deferred);
	extra = deferred.iwi - plain.iwi;

	TH_LOG("plain: %zu samples, %lld IWIs in %.2f s of CPU",
	       plain.st.samples, plain.iwi, plain.cpu);
	TH_LOG("deferred: %zu samples, %zu records, %lld IWIs in %.2f s of CPU",
	       deferred.st.samples, deferred.st.records, deferred.iwi, deferred.cpu);
	TH_LOG("deferred: %zu with a cookie, %zu in user mode walked in place",
	       deferred.st.deferred, deferred.st.user_mode);
	EXPECT_EQ(0, deferred.st.user_mode_deferred)
		TH_LOG("want user-mode samples walked in place, %zu of %zu had a cookie (%s)",
		       deferred.st.user_mode_deferred, deferred.st.user_mode,
		       deferred.st.user_mode_msg);
	EXPECT_EQ(0, deferred.st.user_mode_walk)
		TH_LOG("want user-mode samples walked from their ip, %zu of %zu not (first: %s)",
		       deferred.st.user_mode_walk, deferred.st.user_mode,
		       deferred.st.walk_msg);
	ASSERT_LE(IWI_MIN_DEFERRED, deferred.st.deferred)
		TH_LOG("expected at least %d samples with a cookie, saw %zu of %zu",
		       IWI_MIN_DEFERRED, deferred.st.deferred, deferred.st.samples);
	ASSERT_LE(IWI_MIN_WALKS, deferred.st.records)
		TH_LOG("expected at least %d walks (records), saw %zu",
		       IWI_MIN_WALKS, deferred.st.records);
	TH_LOG("%.3f extra IWIs per deferred sample, %.3f per walk",
	       (double)extra / deferred.st.deferred,
	       (double)extra / deferred.st.records);
	ASSERT_LT(extra * 10, IWI_MAX_PER_10_WALKS * (long long)deferred.st.records)
		TH_LOG("want < %.1f extra IWIs per walk, %lld for %zu (%.3f each)",
		       IWI_MAX_PER_10_WALKS / 10.0, extra, deferred.st.records,
		       (double)extra / deferred.st.records);
}

TEST_HARNESS_MAIN
