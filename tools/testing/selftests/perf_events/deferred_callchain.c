// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED at work: the cookies of samples and the
 * PERF_RECORD_CALLCHAIN_DEFERRED records that carry their user stacks,
 * checked against a call chain whose return addresses the test records
 * itself; samples taken in user mode, walked in place; the deferred and
 * the inline walks of the same stack.
 *
 * Built 64-bit, and 32-bit as deferred_callchain_32, a compat task (see
 * deferred_chain.h).
 */
#define _GNU_SOURCE

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_chain.h"

TEST(known_chain_in_long_syscalls)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	struct cookie_stats st;
	struct ring r, *rp = &r;
	struct chain c;

	chain_init(_metadata, &c, WANT_SAMPLES);
	open_ring(_metadata, &r, &attr, 0, -1, DATA_PAGES);
	sample_chain(_metadata, &c, &rp, 1);

	st = check_cookies(_metadata, &r, gettid_(), ALL_DEFERRED | RECORD_AFTER);
	ASSERT_LE(10, st.samples)
		TH_LOG("expected at least 10 samples, saw %d in %ld reads of %zu bytes",
		       st.samples, c.reads, c.len);
	EXPECT_LE(2, st.max_per_cookie)
		TH_LOG("want several samples per readv() of %zu B, max %d in %d cookies",
		       c.len, st.max_per_cookie, st.cookies);
	check_chain_records(_metadata, &r, gettid_(), &c, CHAIN_DEPTH);
	TH_LOG("%d samples, %d cookies, up to %d samples per cookie, %ld reads of %zu bytes",
	       st.samples, st.cookies, st.max_per_cookie, c.reads, c.len);

	close_ring(&r);
	chain_fini(&c);
}

/* Does a kernel-mode sample of tid carry cookie? */
static bool kernel_sample_with(const struct ring *r, pid_t tid, __u64 cookie)
{
	size_t i;

	for (i = 0; i < r->nr_rec; i++)
		if (r->rec[i].type == PERF_RECORD_SAMPLE &&
		    r->rec[i].tid == (__u32)tid && r->rec[i].cookie == cookie &&
		    taken_in_kernel_mode(&r->rec[i]))
			return true;
	return false;
}

/*
 * A sample taken in user mode has no kernel stay whose walk it could share:
 * deferring it would cost the deferred work and a record on top of the
 * same walk. It is walked in place (cookie 0), from its own ip, and a task
 * spinning in user mode gets no records but those of its few kernel-mode
 * samples (interrupts, page faults).
 */
TEST(user_mode_samples_are_walked_in_place)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	int user = 0, in_loop = 0, bad_cookie = 0, bad_chain = 0, bad_ip = 0;
	int bad_caller = 0, records = 0, orphans = 0, lost = 0;
	char cookie_msg[128] = "", chain_msg[128] = "", ip_msg[160] = "";
	char caller_msg[160] = "", orphan_msg[128] = "";
	unsigned long loops = 1000000;
	pid_t tid = gettid_();
	struct cookie_stats st;
	struct chain c;
	struct ring r;
	double t;
	size_t i;

	chain_init(_metadata, &c, WANT_SAMPLES);
	c.deadline = ring_now() + 60;
	c.want_samples = 0;
	t = ring_now();
	spin_user(&c, loops);		/* one round, to size the loop: ~5 ms */
	t = ring_now() - t;
	if (t > 0)
		loops = loops * 0.005 / t + 1;

	open_ring(_metadata, &r, &attr, 0, -1, DATA_PAGES);
	c.rings[0] = &r;
	c.nr_rings = 1;
	c.want_samples = WANT_SAMPLES;
	c.deadline = ring_now() + RUN_SECONDS;
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));
	spin_user(&c, loops);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);

	st = check_cookies(_metadata, &r, tid, ALL_DEFERRED | RECORD_AFTER);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *s = &r.rec[i];
		const __u64 *ips;
		__u64 nr;

		lost += s->type == PERF_RECORD_LOST ||
			s->type == PERF_RECORD_LOST_SAMPLES;
		/*
		 * Only a kernel-mode sample asks for a walk. The stay that
		 * sampling stopped in gets no record (a disabled event gets
		 * nothing), so it needs no excuse here.
		 */
		if (s->type == PERF_RECORD_CALLCHAIN_DEFERRED) {
			records++;
			if (!kernel_sample_with(&r, tid, s->cookie) && !orphans++)
				snprintf(orphan_msg, sizeof(orphan_msg),
					 "record %zu of tid %u, cookie %#llx",
					 i, s->tid, (unsigned long long)s->cookie);
			continue;
		}
		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)tid ||
		    !taken_in_user_mode(s))
			continue;
		user++;
		if (s->cookie && !bad_cookie++)
			snprintf(cookie_msg, sizeof(cookie_msg),
				 "ip %#llx, cookie %#llx",
				 (unsigned long long)s->ip,
				 (unsigned long long)s->cookie);
		/* PERF_CONTEXT_USER first: no kernel ips before the user part. */
		ips = user_mode_walk(s, &nr);
		if (!ips) {
			if (!bad_chain++)
				snprintf(chain_msg, sizeof(chain_msg),
					 "ip %#llx: ips[0] = %#llx of %llu",
					 (unsigned long long)s->ip,
					 s->nr ? (unsigned long long)s->ips[0] : 0ULL,
					 (unsigned long long)s->nr);
			continue;
		}
		/* The walk starts where this very interrupt came. */
		if ((!nr || ips[0] != s->ip) && !bad_ip++)
			snprintf(ip_msg, sizeof(ip_msg),
				 "sample ip %#llx, user ips[0] %#llx of %llu",
				 (unsigned long long)s->ip,
				 nr ? (unsigned long long)ips[0] : 0ULL,
				 (unsigned long long)nr);
		if (s->ip < c.spin_start || s->ip > c.spin_end)
			continue;
		in_loop++;
		if ((nr < 2 || ips[1] != c.expect[1]) && !bad_caller++)
			snprintf(caller_msg, sizeof(caller_msg),
				 "ip %#llx: ips[1] expected %#lx, seen %#llx of %llu",
				 (unsigned long long)s->ip, c.expect[1],
				 nr > 1 ? (unsigned long long)ips[1] : 0ULL,
				 (unsigned long long)nr);
	}
	ASSERT_LE(10, user)
		TH_LOG("expected at least 10 user-mode samples while spinning, saw %d",
		       user);
	EXPECT_EQ(0, bad_cookie)
		TH_LOG("want cookie 0 on user-mode samples, %d of %d had one (first: %s)",
		       bad_cookie, user, cookie_msg);
	EXPECT_EQ(0, bad_chain)
		TH_LOG("want PERF_CONTEXT_USER first in user-mode samples, %d of %d not (%s)",
		       bad_chain, user, chain_msg);
	EXPECT_EQ(0, bad_ip)
		TH_LOG("want user ips[0] == the user-mode sample's ip, %d of %d differ (first: %s)",
		       bad_ip, user, ip_msg);
	EXPECT_LE(1, in_loop)
		TH_LOG("want samples in the spin loop [%#lx, %#lx], none of %d",
		       c.spin_start, c.spin_end, user);
	EXPECT_EQ(0, bad_caller)
		TH_LOG("expected ips[1] == spin_user's return address, %d of %d differ (first: %s)",
		       bad_caller, in_loop, caller_msg);
	/* A lost sample may be the one that asked for a record. */
	if (!lost)
		EXPECT_EQ(0, orphans)
			TH_LOG("want records for kernel-mode samples only, %d of %d not (%s)",
			       orphans, records, orphan_msg);
	TH_LOG("%d samples: %d in user mode, %d in the kernel (%d cookies); %d records",
	       st.samples, st.user, st.kernel, st.cookies, records);

	close_ring(&r);
	chain_fini(&c);
}

TEST(inline_and_deferred_agree)
{
	unsigned long expect[2][CHAIN_DEPTH];
	const __u64 *walk[2] = { NULL, NULL };
	__u64 walk_nr[2] = { 0, 0 }, k;
	int found[2] = { 0, 0 }, bad[2] = { 0, 0 };
	char msg[2][200] = { "", "" };
	pid_t tid = gettid_();
	struct ring r[2];
	struct chain c;
	int mode;
	size_t i;

	chain_init(_metadata, &c, WANT_SAMPLES);
	/* mode 0 deferred, mode 1 inline: the same call site, the same stack */
	for (mode = 0; mode < 2; mode++) {
		struct perf_event_attr attr =
			clock_attr(PERF_COUNT_SW_CPU_CLOCK, mode == 0);
		struct ring *rp = &r[mode];

		open_ring(_metadata, &r[mode], &attr, 0, -1, DATA_PAGES);
		sample_chain(_metadata, &c, &rp, 1);
		memcpy(expect[mode], c.expect, sizeof(c.expect));
	}
	ASSERT_EQ(0, memcmp(expect[0], expect[1], sizeof(expect[0])))
		TH_LOG("the two runs of the chain did not have the same frames");

	for (mode = 0; mode < 2; mode++) {
		for (i = 0; i < r[mode].nr_rec; i++) {
			const struct ring_record *rr = &r[mode].rec[i];
			const __u64 *ips;
			__u64 nr;

			if (rr->tid != (__u32)tid)
				continue;
			if (mode == 0 && rr->type == PERF_RECORD_CALLCHAIN_DEFERRED) {
				ips = rr->ips;
				nr = rr->nr;
			} else if (mode == 1 && rr->type == PERF_RECORD_SAMPLE &&
				   inline_user_part(rr, &ips, &nr)) {
				/* nothing */
			} else {
				continue;
			}
			if (!nr || ips[0] != c.expect[0])
				continue;
			if (!found[mode]++) {
				walk[mode] = ips;
				walk_nr[mode] = nr;
			}
			for (k = 0; k < CHAIN_DEPTH; k++) {
				if (k < nr && ips[k] == c.expect[k])
					continue;
				if (!bad[mode]++)
					snprintf(msg[mode], sizeof(msg[mode]),
						 "ips[%llu] expected %#lx (%s), seen %#llx of %llu",
						 (unsigned long long)k, c.expect[k],
						 frame_name[k],
						 k < nr ? (unsigned long long)ips[k] : 0ULL,
						 (unsigned long long)nr);
				break;
			}
		}
	}
	EXPECT_LE(1, found[0])
		TH_LOG("expected deferred records starting at the readv() IP %#lx, saw none",
		       c.expect[0]);
	EXPECT_LE(1, found[1])
		TH_LOG("expected inline user callchains starting at the readv() IP %#lx, saw none",
		       c.expect[0]);
	EXPECT_EQ(0, bad[0])
		TH_LOG("deferred walk: %d of %d records differ from the chain; first: %s",
		       bad[0], found[0], msg[0]);
	EXPECT_EQ(0, bad[1])
		TH_LOG("inline walk: %d of %d samples differ from the chain; first: %s",
		       bad[1], found[1], msg[1]);

	/* Beyond the chain, the two walks see the same stack, too. */
	if (walk[0] && walk[1]) {
		__u64 n = walk_nr[0] < walk_nr[1] ? walk_nr[0] : walk_nr[1];

		for (k = 0; k < n; k++)
			if (walk[0][k] != walk[1][k])
				break;
		EXPECT_EQ(n, k)
			TH_LOG("frame %llu: deferred walk %#llx, inline walk %#llx",
			       (unsigned long long)k,
			       (unsigned long long)walk[0][k],
			       (unsigned long long)walk[1][k]);
		TH_LOG("deferred walk %llu frames, inline walk %llu frames",
		       (unsigned long long)walk_nr[0],
		       (unsigned long long)walk_nr[1]);
	}

	close_ring(&r[0]);
	close_ring(&r[1]);
	chain_fini(&c);
}

TEST_HARNESS_MAIN
