// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED from the observer's side, with a hardware
 * PMU (NMI): a user-mode sample is not deferred either, its user stack is
 * walked in place, from where the NMI came.
 *
 * The other tests from the observer's side: deferred_cgroup, deferred_pidns,
 * deferred_paused, deferred_backward, deferred_iowq and deferred_enable.
 *
 * Build with frame pointers and no sibling calls (see Makefile).
 */
#define _GNU_SOURCE
#include <sys/ioctl.h>
#include <sys/uio.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_spin.h"
#include "deferred_observe.h"

#define HW_SPIN_SECONDS		0.005
/* A period, not a frequency, which a lowered max_sample_rate would refuse. */
#define HW_PERIOD		1000003	/* cycles: ~1000-4000 samples/s */

/*
 * hardware_pmu_user_samples_walked_in_place: spin in user mode, in a loop
 * whose code range and caller are known, and read /dev/zero in between.
 */
struct hw_spin {
	unsigned long ret;		/* hw_spin()'s return address */
	unsigned long start, end;	/* its loop */
};

static __attribute__((noipa)) void hw_spin(struct hw_spin *s, unsigned long loops)
{
	unsigned long base = (unsigned long)hw_spin, start, end;

	s->ret = (unsigned long)__builtin_return_address(0);
	if (!loops)
		loops = 1;
	/* Offsets from the function: the same code for i386 and x86-64. */
	asm volatile("lea 1f-hw_spin(%[base]), %[start]\n\t"
		     "lea 2f-hw_spin(%[base]), %[end]\n"
		     "1:\tdec %[n]\n\t"
		     "jnz 1b\n"
		     "2:"
		     : [n] "+r" (loops), [start] "=&r" (start), [end] "=&r" (end)
		     : [base] "r" (base)
		     : "cc");
	s->start = start;
	s->end = end;
}

static unsigned long hw_spin_loops(struct hw_spin *s, double seconds)
{
	double t;

	hw_spin(s, SPIN_CAL_LOOPS);
	t = ring_now();
	hw_spin(s, SPIN_CAL_LOOPS);
	return loops_for(seconds, ring_now() - t);
}

static struct perf_event_attr cycles_attr(int precise)
{
	struct perf_event_attr attr =
		sample_attr(PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, HW_PERIOD,
			    PERF_SAMPLE_CPU | PERF_SAMPLE_CALLCHAIN_DEFERRED);

	attr.precise_ip = precise;
	return attr;
}

/*
 * Sample the spin loop and the reads with fd, the cycles event at the
 * given precise_ip. A user-mode sample is not deferred, from NMI either
 * (deferring it would cost a self-interrupt to run the same walk): its
 * user stack is walked in place, and for a sample in the loop it starts in
 * the loop, called from hw_spin()'s caller. Without PEBS or IBS
 * (precise_ip 0) the sample's IP is where the NMI came, and the walk
 * starts there; a PEBS or IBS sample's IP is the one the PMU recorded, the
 * walk still starts where the NMI came. The samples in read() are
 * deferred from NMI, and joined with their records.
 *
 * Where the NMI came decides, not the cpumode of the sample: PEBS takes
 * the latter from the PMU's IP, so that a PEBS sample of user code whose
 * NMI came in the kernel (read()'s entry) is deferred below a kernel part.
 */
static void hw_round(struct __test_metadata *_metadata, int fd, int precise)
{
	struct perf_event_attr attr = cycles_attr(precise);
	int user = 0, deferred = 0, no_walk = 0, with_walk = 0, same_ip = 0;
	int in_loop = 0, loop_ok = 0, skid = 0;
	char cookie_msg[96] = "", walk_msg[128] = "", ip_msg[128] = "";
	char loop_msg[160] = "";
	__u32 tid = gettid_();
	struct hw_spin s;
	unsigned long loops;
	struct burner b;
	double deadline;
	struct join j;
	struct ring r;
	__u64 excuse;
	size_t i;

	burner_init(_metadata, &b);
	ASSERT_EQ(0, ring_map(&r, fd, &attr, DATA_PAGES))
		TH_LOG("mmap: %s", strerror(errno));
	loops = hw_spin_loops(&s, HW_SPIN_SECONDS);
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ENABLE, 0));
	deadline = ring_now() + RUN_SECONDS;
	do {
		hw_spin(&s, loops);
		ASSERT_EQ((ssize_t)b.len, readv(b.zero_fd, b.iov, b.iovcnt))
			TH_LOG("readv of /dev/zero: %s", strerror(errno));
		ring_drain(&r);
	} while (r.nr_samples < 2 * WANT_SAMPLES && ring_now() < deadline);
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *sm = &r.rec[i];
		const __u64 *ips;
		__u64 nr;

		if (sm->type != PERF_RECORD_SAMPLE || sm->tid != tid ||
		    !taken_in_user_mode(sm))
			continue;
		if (precise && sm->nr && sm->ips[0] == PERF_CONTEXT_KERNEL) {
			skid++;
			continue;
		}
		user++;
		if (sm->cookie && !deferred++)
			snprintf(cookie_msg, sizeof(cookie_msg), "ip %#llx, cookie %#llx",
				 (unsigned long long)sm->ip,
				 (unsigned long long)sm->cookie);
		/* PERF_CONTEXT_USER first: no kernel ips before the user part. */
		ips = user_mode_walk(sm, &nr);
		if (!ips || !nr) {
			if (!no_walk++)
				snprintf(walk_msg, sizeof(walk_msg),
					 "ip %#llx: %llu ips, ips[0] %#llx",
					 (unsigned long long)sm->ip,
					 (unsigned long long)sm->nr,
					 sm->nr ? (unsigned long long)sm->ips[0] : 0ULL);
			continue;
		}
		with_walk++;
		if (ips[0] == sm->ip)
			same_ip++;
		else if (!ip_msg[0])
			snprintf(ip_msg, sizeof(ip_msg), "sample ip %#llx, user ips[0] %#llx",
				 (unsigned long long)sm->ip,
				 (unsigned long long)ips[0]);
		if (sm->ip < s.start || sm->ip >= s.end)
			continue;
		in_loop++;
		if (nr >= 2 && ips[0] >= s.start && ips[0] < s.end && ips[1] == s.ret)
			loop_ok++;
		else if (!loop_msg[0])
			snprintf(loop_msg, sizeof(loop_msg),
				 "ip %#llx: ips[0] %#llx, ips[1] %#llx of %llu, loop [%#lx, %#lx) called from %#lx",
				 (unsigned long long)sm->ip,
				 (unsigned long long)ips[0],
				 nr > 1 ? (unsigned long long)ips[1] : 0ULL,
				 (unsigned long long)nr, s.start, s.end, s.ret);
	}
	excuse = last_cookie(&r, tid);
	j = join_tid(&r, tid, &excuse, 1, true);

	ASSERT_LE(MIN_SAMPLES, user)
		TH_LOG("precise_ip %d: expected user-mode samples while spinning, saw %d of %zu",
		       precise, user, r.nr_samples);
	EXPECT_EQ(0, deferred)
		TH_LOG("precise_ip %d: want no user-mode sample deferred, %d of %d were (%s)",
		       precise, deferred, user, cookie_msg);
	EXPECT_EQ(0, no_walk)
		TH_LOG("precise_ip %d: want PERF_CONTEXT_USER and user ips only, %d of %d not (%s)",
		       precise, no_walk, user, walk_msg);
	/* The samples in read() are deferred as ever, from NMI. */
	EXPECT_LE(j.kernel / 2, j.deferred)
		TH_LOG("precise_ip %d: want most kernel-mode samples deferred, %d of %d were",
		       precise, j.deferred, j.kernel);
	/* Not expect_joined(): its user-mode rule goes by the cpumode. */
	EXPECT_EQ(0, j.bad)
		TH_LOG("precise_ip %d: want 1 record per cookie, %d of %d had not (first: %s)",
		       precise, j.bad, j.deferred, j.msg);
	EXPECT_LE(1, j.joined)
		TH_LOG("precise_ip %d: expected samples joined with their records, none of %d",
		       precise, j.deferred);
	EXPECT_LE(1, in_loop)
		TH_LOG("precise_ip %d: expected samples in the loop [%#lx, %#lx), none of %d",
		       precise, s.start, s.end, user);
	EXPECT_LE(in_loop * 9, loop_ok * 10)
		TH_LOG("precise_ip %d: want 90%% of loop samples walked from it: %d of %d (%s)",
		       precise, loop_ok, in_loop, loop_msg);
	/* The in-place walk starts at the interrupted registers' IP. */
	if (!precise) {
		EXPECT_EQ(with_walk, same_ip)
			TH_LOG("precise_ip 0: want user ips[0] == sample ip: %d of %d (%s)",
			       same_ip, with_walk, ip_msg);
	}
	TH_LOG("precise_ip %d: %d user samples, %d walked, %d at ips[0], %d of %d in the loop",
	       precise, user, with_walk, same_ip, loop_ok, in_loop);
	TH_LOG("precise_ip %d: %d kernel-mode samples, %d deferred, %d joined; %d skid",
	       precise, j.kernel, j.deferred, j.joined, skid);

	ring_unmap(&r);
	burner_fini(&b);
}

TEST(hardware_pmu_user_samples_walked_in_place)
{
	struct perf_event_attr attr;
	int precise, fd = -1;

	for (precise = 2; precise >= 0; precise--) {
		attr = cycles_attr(precise);
		fd = perf_open(&attr, 0, -1);
		if (fd >= 0)
			break;
		if (errno == ENOENT || errno == ENODEV)
			SKIP(return, "no hardware PMU for cycles: %s", strerror(errno));
		if (errno == EACCES || errno == EPERM)
			SKIP(return, "cycles event not allowed: %s", strerror(errno));
		if (precise && (errno == EOPNOTSUPP || errno == EINVAL))
			continue;
		if (errno == EOPNOTSUPP)
			SKIP(return, "no sampling cycles event: %s", strerror(errno));
		ASSERT_LE(0, fd) TH_LOG("perf_event_open(cycles, precise_ip 0): %s",
					strerror(errno));
	}
	TH_LOG("cycles event with precise_ip %d", precise);
	hw_round(_metadata, fd, precise);
	close(fd);
	if (!precise)
		return;

	/* The IP of a PEBS or IBS sample is not where the NMI came: check that too. */
	attr = cycles_attr(0);
	fd = perf_open(&attr, 0, -1);
	ASSERT_LE(0, fd) TH_LOG("perf_event_open(cycles, precise_ip 0): %s", strerror(errno));
	hw_round(_metadata, fd, 0);
	close(fd);
}

TEST_HARNESS_MAIN
