// SPDX-License-Identifier: GPL-2.0
/*
 * Deferred user callchains and CPUs: a task that migrates while blocked,
 * events bound to a CPU, which get the records written on their CPU, and
 * a per-CPU event observing every task that runs there.
 *
 * Built 64-bit, and 32-bit as deferred_cpu_32, a compat task (see
 * deferred_chain.h).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/socket.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_chain.h"

#define PF_KTHREAD		0x00200000

/* A thread that blocks twice in one recvfrom(MSG_WAITALL) of 2 bytes. */
struct blocker {
	int sock;
	int cpu;		/* where it starts */
	pid_t tid;
	int go;
	long ret;
	unsigned long recv_ret;	/* user IP after its recvfrom() */
};

static void *blocker_main(void *arg)
{
	struct blocker *b = arg;
	char buf[2];
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(b->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		b->ret = -errno;
		__atomic_store_n(&b->tid, -1, __ATOMIC_RELEASE);
		return NULL;
	}
	__atomic_store_n(&b->tid, gettid_(), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&b->go, __ATOMIC_ACQUIRE))
		asm volatile("pause" ::: "memory");
	/* No address: the kernel ignores addrlen, not passed on i386. */
	b->ret = raw_syscall(b->recv_ret, __NR_recvfrom, b->sock, buf, 2,
			     MSG_WAITALL, 0, 0);
	return NULL;
}

/*
 * Start a blocker pinned to the first of two CPUs this task may run on,
 * cpus[]; false (the test skipped) without two.
 */
static bool blocker_start(struct __test_metadata *_metadata, struct blocker *b,
			  int cpus[2], int sv[2], pthread_t *th)
{
	cpu_set_t set;
	int i, n = 0;

	ASSERT_EQ(0, sched_getaffinity(0, sizeof(set), &set));
	for (i = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	if (n < 2)
		SKIP(return false, "needs 2 CPUs to migrate a task, has %d", n);

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	b->sock = sv[0];
	b->cpu = cpus[0];
	ASSERT_EQ(0, pthread_create(th, NULL, blocker_main, b));
	while (!__atomic_load_n(&b->tid, __ATOMIC_ACQUIRE))
		usleep(1000);
	ASSERT_LT(0, b->tid) TH_LOG("pinning to CPU %d: %s", b->cpu, strerror(-b->ret));
	return true;
}

/*
 * One stay on two CPUs: let the blocker block in its recvfrom() on
 * cpus[0], move it to cpus[1], wake it, let it block again there for its
 * second byte, then let it return and end.
 */
static void blocker_migrate(struct __test_metadata *_metadata, struct blocker *b,
			    const int cpus[2], const int sv[2], pthread_t th)
{
	long v = voluntary_switches(b->tid);
	cpu_set_t set;

	ASSERT_LE(0, v);
	__atomic_store_n(&b->go, 1, __ATOMIC_RELEASE);
	ASSERT_TRUE(wait_blocked(b->tid, v)) TH_LOG("the thread never blocked");
	v = voluntary_switches(b->tid);
	CPU_ZERO(&set);
	CPU_SET(cpus[1], &set);
	ASSERT_EQ(0, sched_setaffinity(b->tid, sizeof(set), &set));
	ASSERT_EQ(1, write(sv[1], "x", 1));
	ASSERT_TRUE(wait_blocked(b->tid, v))
		TH_LOG("the thread did not block again for its second byte");
	ASSERT_EQ(1, write(sv[1], "y", 1));
	ASSERT_EQ(0, pthread_join(th, NULL));
	ASSERT_EQ(2, b->ret) TH_LOG("recvfrom: %ld", b->ret);
}

/* A context switch sample of each block, in the kernel, with its cookie. */
static struct perf_event_attr switch_attr(void)
{
	struct perf_event_attr attr =
		sw_sample_attr(PERF_COUNT_SW_CONTEXT_SWITCHES, 1, true);

	attr.disabled = 0;
	return attr;
}

TEST(migrated_while_blocked)
{
	struct perf_event_attr attr = switch_attr();
	int cpus[2], sv[2], on_a = 0, on_b = 0, other = 0;
	struct blocker b = { 0 };
	size_t i, nrec, rec = 0, first = SIZE_MAX;
	int found = 0;
	pthread_t th;
	struct ring r;
	__u64 cookie = 0;

	if (!blocker_start(_metadata, &b, cpus, sv, &th))
		return;
	open_ring(_metadata, &r, &attr, b.tid, -1, DATA_PAGES);
	blocker_migrate(_metadata, &b, cpus, sv, th);

	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);
	check_cookies(_metadata, &r, b.tid, RECORD_AFTER);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type == PERF_RECORD_CALLCHAIN_DEFERRED &&
		    rr->tid == (__u32)b.tid && rr->nr && rr->ips[0] == b.recv_ret) {
			if (!found++) {
				rec = i;
				cookie = rr->cookie;
			}
		}
	}
	ASSERT_EQ(1, found)
		TH_LOG("expected one record of the recvfrom() stay (ips[0] %#lx), saw %d",
		       b.recv_ret, found);
	EXPECT_EQ(cpus[0] + 1, (__u32)cookie)
		TH_LOG("cookie %#llx: expected cpu+1 = %d of the CPU where it was taken",
		       (unsigned long long)cookie, cpus[0] + 1);
	EXPECT_EQ(cpus[1], r.rec[rec].cpu)
		TH_LOG("expected the record written on CPU %d after migration, seen CPU %llu",
		       cpus[1], (unsigned long long)r.rec[rec].cpu);
	nrec = records_of_cookie(&r, cookie, &i);
	EXPECT_EQ(1, nrec) TH_LOG("cookie %#llx: expected 1 record, saw %zu",
				  (unsigned long long)cookie, nrec);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *s = &r.rec[i];

		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)b.tid)
			continue;
		if (s->cookie == cookie) {
			if (first == SIZE_MAX)
				first = i;
			on_a += s->cpu == (__u64)cpus[0];
			on_b += s->cpu == (__u64)cpus[1];
		} else if (first != SIZE_MAX && i < rec) {
			other++;
		}
	}
	EXPECT_LE(1, on_a)
		TH_LOG("expected a sample of the first block on CPU %d with cookie %#llx, saw none",
		       cpus[0], (unsigned long long)cookie);
	EXPECT_LE(1, on_b)
		TH_LOG("want a sample of block 2 on CPU %d with cookie %#llx, none",
		       cpus[1], (unsigned long long)cookie);
	EXPECT_EQ(0, other)
		TH_LOG("expected every sample of the stay to carry cookie %#llx, %d did not",
		       (unsigned long long)cookie, other);

	close_ring(&r);
	close(sv[0]);
	close(sv[1]);
}

/*
 * The task's events bound to one CPU each, as perf record opens them for
 * a command: a stay sampled on CPU A that returns to user space on CPU B
 * gets its record in B's buffer, where its sample in A's buffer joins it
 * (by tid and cookie, as perf joins across buffers). Never in A's: a
 * CPU's buffer is written on that CPU only, and a record written there
 * from B could overlap A's own samples.
 */
TEST(cpu_bound_buffers_get_records_written_on_their_cpu)
{
	struct perf_event_attr attr = switch_attr();
	int cpus[2], sv[2], k, in[2] = { 0, 0 }, foreign = 0, joined = 0;
	struct blocker b = { 0 };
	struct ring r[2];
	__u64 cookie = 0;
	pthread_t th;
	size_t i;

	if (!blocker_start(_metadata, &b, cpus, sv, &th))
		return;
	for (k = 0; k < 2; k++)
		open_ring(_metadata, &r[k], &attr, b.tid, cpus[k], DATA_PAGES);
	blocker_migrate(_metadata, &b, cpus, sv, th);

	for (k = 0; k < 2; k++) {
		ASSERT_EQ(0, ioctl(r[k].fd, PERF_EVENT_IOC_DISABLE, 0));
		ring_drain(&r[k]);
		EXPECT_EQ(0, r[k].nr_malformed) TH_LOG("malformed: %s", r[k].why);
		for (i = 0; i < r[k].nr_rec; i++) {
			const struct ring_record *rr = &r[k].rec[i];

			if (rr->type != PERF_RECORD_CALLCHAIN_DEFERRED)
				continue;
			if (rr->cpu != (__u64)cpus[k] && !foreign++)
				TH_LOG("CPU %d's buffer: record %zu (%#llx) written on CPU %llu",
				       cpus[k], i, (unsigned long long)rr->cookie,
				       (unsigned long long)rr->cpu);
			if (rr->tid == (__u32)b.tid && rr->nr &&
			    rr->ips[0] == b.recv_ret) {
				in[k]++;
				cookie = rr->cookie;
			}
		}
	}
	EXPECT_EQ(0, foreign)
		TH_LOG("expected every record written on its buffer's CPU, %d were not",
		       foreign);
	EXPECT_EQ(0, in[0])
		TH_LOG("expected no record of the recvfrom() stay in CPU %d's buffer, saw %d",
		       cpus[0], in[0]);
	ASSERT_EQ(1, in[1])
		TH_LOG("expected one record of the recvfrom() stay in CPU %d's buffer, saw %d",
		       cpus[1], in[1]);
	for (i = 0; i < r[0].nr_rec; i++)
		joined += r[0].rec[i].type == PERF_RECORD_SAMPLE &&
			  r[0].rec[i].tid == (__u32)b.tid &&
			  r[0].rec[i].cookie == cookie;
	EXPECT_LE(1, joined)
		TH_LOG("want a sample of block 1 in CPU %d's buffer with cookie %#llx, none",
		       cpus[0], (unsigned long long)cookie);

	close_ring(&r[0]);
	close_ring(&r[1]);
	close(sv[0]);
	close(sv[1]);
}

/*
 * The same stay with only CPU A's event: no buffer observes the task on
 * CPU B, where it returns, so no record is written anywhere; the event
 * that sampled the stay on CPU A counts it lost (PERF_FORMAT_LOST), and
 * its sample of the stay stays unresolved for a reason the tool can see.
 */
TEST(cpu_bound_event_alone_counts_the_record_it_misses)
{
	struct perf_event_attr attr = switch_attr();
	int cpus[2], sv[2], samples = 0, records = 0;
	struct blocker b = { 0 };
	__u64 cookie = 0, lost;
	struct ring r;
	pthread_t th;
	size_t i;

	attr.read_format = PERF_FORMAT_LOST;
	if (!blocker_start(_metadata, &b, cpus, sv, &th))
		return;
	open_ring(_metadata, &r, &attr, b.tid, cpus[0], DATA_PAGES);
	blocker_migrate(_metadata, &b, cpus, sv, th);

	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);
	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type == PERF_RECORD_SAMPLE && rr->tid == (__u32)b.tid &&
		    rr->cookie && (__u32)rr->cookie == (__u32)cpus[0] + 1) {
			samples++;
			cookie = rr->cookie;
		}
		records += rr->type == PERF_RECORD_CALLCHAIN_DEFERRED &&
			   rr->tid == (__u32)b.tid;
	}
	ASSERT_LE(1, samples)
		TH_LOG("want a deferred sample of the first block in CPU %d's buffer, none",
		       cpus[0]);
	EXPECT_EQ(0, records_of_cookie(&r, cookie, &i))
		TH_LOG("cookie %#llx: a record in CPU %d's buffer, written on CPU %d?",
		       (unsigned long long)cookie, cpus[0], cpus[1]);
	lost = lost_count(r.fd);
	EXPECT_EQ(1, lost)
		TH_LOG("want the missed record counted lost once, the count is %llu",
		       (unsigned long long)lost);

	close_ring(&r);
	close(sv[0]);
	close(sv[1]);
}

static bool is_kernel_thread(__u32 pid)
{
	char path[64], buf[512], *p;
	unsigned long flags;
	FILE *f;
	size_t n;

	if (!pid)
		return true;	/* idle */
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	/* after "comm)": state ppid pgrp session tty_nr tpgid flags */
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1)
		return false;
	return flags & PF_KTHREAD;
}

TEST(per_cpu_event)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK, true);
	int kthread = 0, bad = 0, cpu, fd;
	pid_t tid = gettid_();
	struct cookie_stats st;
	struct ring r;
	char msg[128] = "";
	struct chain c;
	cpu_set_t set;
	size_t i;

	cpu = sched_getcpu();
	ASSERT_LE(0, cpu);
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(set), &set));

	fd = perf_open(&attr, -1, cpu);
	if (fd < 0 && (errno == EACCES || errno == EPERM))
		SKIP(return, "a per-CPU event needs privileges (%s)", strerror(errno));
	ASSERT_LE(0, fd) TH_LOG("perf_event_open(cpu %d): %s", cpu, strerror(errno));
	ASSERT_EQ(0, ring_map(&r, fd, &attr, DATA_PAGES))
		TH_LOG("mmap: %s", strerror(errno));

	chain_init(_metadata, &c, WANT_SAMPLES);
	c.rings[0] = &r;
	c.nr_rings = 1;
	c.deadline = ring_now() + RUN_SECONDS;
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_ENABLE, 0));
	chain_run(&c);
	for (i = 0; i < 20; i++) {	/* let the CPU idle: kernel-thread samples */
		usleep(2000);
		ring_drain(&r);
	}
	ASSERT_EQ(0, ioctl(fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);

	st = check_cookies(_metadata, &r, tid, ALL_DEFERRED | RECORD_AFTER);
	ASSERT_LE(10, st.samples)
		TH_LOG("expected at least 10 samples of this thread on CPU %d, saw %d",
		       cpu, st.samples);
	check_chain_records(_metadata, &r, tid, &c, CHAIN_DEPTH);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *s = &r.rec[i];

		if (s->type != PERF_RECORD_SAMPLE || !is_kernel_thread(s->pid))
			continue;
		kthread++;
		if (s->cookie && !bad++)
			snprintf(msg, sizeof(msg), "pid %u tid %u cookie %#llx",
				 s->pid, s->tid, (unsigned long long)s->cookie);
	}
	EXPECT_LE(1, kthread)
		TH_LOG("expected samples of the idle task or kernel threads on CPU %d, saw none",
		       cpu);
	EXPECT_EQ(0, bad)
		TH_LOG("expected cookie 0 on kernel-thread samples, %d of %d had one (first: %s)",
		       bad, kthread, msg);

	close_ring(&r);
	chain_fini(&c);
}

TEST_HARNESS_MAIN
