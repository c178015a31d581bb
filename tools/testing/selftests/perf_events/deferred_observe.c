// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED from the observer's side: which buffers
 * get the PERF_RECORD_CALLCHAIN_DEFERRED records, and what they say there.
 *
 * - A cgroup event gets the user stacks of its cgroup's tasks only.
 * - In a child pid namespace, a sample and its record carry the same tid,
 *   as the namespace of the event's owner sees it.
 * - A record that comes while the buffer's output is paused is not in the
 *   buffer, and is counted lost like any other record.
 * - A backward (overwritable) buffer gets its records, written backward.
 * - io_uring's io-wq workers never defer.
 * - An event enabled after the walk of a stay that goes on (io_uring runs
 *   task work before its system call returns) walks that stay in place.
 * - With a hardware PMU (NMI), a user-mode sample is not deferred either:
 *   its user stack is walked in place, from where the NMI came.
 *
 * Build with frame pointers and no sibling calls (see Makefile).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <linux/magic.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_spin.h"
#include "deferred_uring.h"

#define PERIOD_NS		200000	/* cpu-clock period */
#define DATA_PAGES		64
#define BACKWARD_PAGES		8	/* small: overwritten several times */
#define BACKWARD_WRAPS		4	/* ... this many times at least */
#define RUN_SECONDS		3.0	/* one sampled run, at most */
#define PHASE_SECONDS		0.3	/* each phase of the paused buffer */
#define WANT_SAMPLES		150
#define MIN_SAMPLES		10
#define ZERO_CHUNK		(1024 * 1024)	/* readv() of /dev/zero: iovec size */
#define ZERO_MAX_CHUNKS		64
#define READ_SECONDS		0.003	/* one readv() of /dev/zero */
#define SPIN_SECONDS		0.001	/* one spin in user mode */
#define HW_SPIN_SECONDS		0.005
/* A period, not a frequency, which a lowered max_sample_rate would refuse. */
#define HW_PERIOD		1000003	/* cycles: ~1000-4000 samples/s */
#define URING_QUEUE		4	/* async reads in flight per round */
#define MAX_WORKERS		64
#define CGROUP_NAME		"deferred_observe"

static __u64 mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * With the lost count in read(): records dropped at the end of a run, once
 * nothing written after them could carry a PERF_RECORD_LOST, show there.
 */
static struct perf_event_attr clock_attr(__u64 config)
{
	struct perf_event_attr attr = sw_sample_attr(config, PERIOD_NS, true);

	attr.read_format = PERF_FORMAT_LOST;
	return attr;
}

static int perf_open_flags(struct perf_event_attr *attr, pid_t pid, int cpu,
			   unsigned long flags)
{
	return syscall(__NR_perf_event_open, attr, pid, cpu, -1, flags);
}

/* The first CPUs this task may run on, at most max; returns how many. */
static int allowed_cpus(int *cpus, int max)
{
	cpu_set_t set;
	int i, n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return 0;
	for (i = 0; i < CPU_SETSIZE && n < max; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	return n;
}

static int pin_to(pid_t tid, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(tid, sizeof(set), &set) ? -errno : 0;
}

/* Every time tid was switched out, voluntarily or not. */
static long all_switches(pid_t tid)
{
	return voluntary_switches(tid) +
	       task_status(tid, "nonvoluntary_ctxt_switches");
}

/*
 * The work of a sampled task: a readv() of /dev/zero (a kernel stay of a
 * few ms, several samples each) and a spin in user mode.
 */
struct burner {
	int zero_fd;
	char *buf;
	struct iovec iov[ZERO_MAX_CHUNKS];
	int iovcnt;
	size_t len;		/* bytes per readv() */
	unsigned long loops;	/* spin_user() loops per round */
};

static void burner_init(struct __test_metadata *_metadata, struct burner *b)
{
	double t;
	int i;

	memset(b, 0, sizeof(*b));
	t = zero_open(_metadata, &b->zero_fd, &b->buf, ZERO_CHUNK);
	b->iovcnt = t > 0 ? READ_SECONDS / t : ZERO_MAX_CHUNKS;
	if (b->iovcnt < 1)
		b->iovcnt = 1;
	if (b->iovcnt > ZERO_MAX_CHUNKS)
		b->iovcnt = ZERO_MAX_CHUNKS;
	for (i = 0; i < b->iovcnt; i++) {
		b->iov[i].iov_base = b->buf;
		b->iov[i].iov_len = ZERO_CHUNK;
	}
	b->len = (size_t)b->iovcnt * ZERO_CHUNK;
	b->loops = spin_loops(SPIN_SECONDS);
}

static void burner_fini(struct burner *b)
{
	free(b->buf);
	close(b->zero_fd);
}

static bool burn(const struct burner *b)
{
	bool ok = readv(b->zero_fd, b->iov, b->iovcnt) == (ssize_t)b->len;

	spin_user(b->loops);
	return ok;
}

/* Burn for "seconds", draining r (if any) after each round. */
static void burn_for(const struct burner *b, struct ring *r, double seconds)
{
	double end = ring_now() + seconds;

	do {
		burn(b);
		if (r)
			ring_drain(r);
	} while (ring_now() < end);
}

/* Records of the given type and tid. */
static int count_of(const struct ring *r, __u32 type, __u32 tid)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++)
		n += r->rec[i].type == type && r->rec[i].tid == tid;
	return n;
}

/* Records of the given type and another tid, or pid; *first: the first tid. */
static int count_other(const struct ring *r, __u32 type, __u32 tid, __u32 pid,
		       __u32 *first)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++) {
		const struct ring_record *rr = &r->rec[i];

		if (rr->type != type || (rr->tid == tid && rr->pid == pid))
			continue;
		if (!n++)
			*first = rr->tid;
	}
	return n;
}

static int count_type(const struct ring *r, __u32 type)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++)
		n += r->rec[i].type == type;
	return n;
}

static bool in_list(__u64 v, const __u64 *list, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (list[i] == v)
			return true;
	return false;
}

/* How the samples of one tid joined with the records of their cookies. */
struct join {
	int samples;	/* of the tid */
	int kernel;	/* ... taken in kernel mode */
	int user;	/* ... taken in user mode: walked in place */
	int bad_user;	/* ... of those, with a cookie or no user part in place */
	int deferred;	/* ... with a cookie */
	int joined;	/* ... whose cookie has one record, of the same tid */
	int excused;	/* ... whose cookie has none, allowed */
	int bad;	/* ... whose cookie has none, several, or another tid's */
	char msg[160];
	char user_msg[160];
};

/*
 * Whether r's buffer dropped records: a PERF_RECORD_LOST tells, and so does
 * the kernel's count (PERF_FORMAT_LOST) of those dropped when the buffer
 * was full until the event was disabled, with no record after them.
 */
static bool ring_lost_records(const struct ring *r)
{
	return count_type(r, PERF_RECORD_LOST) ||
	       (r->read_format == PERF_FORMAT_LOST && lost_count(r->fd));
}

/*
 * Join the samples of tid with the records of their cookies: one record per
 * cookie and buffer, with the sample's tid. A cookie may have no record if
 * it is in excuse[] (the stay sampling stopped in, ...), or if lost_ok and
 * the buffer lost records. A sample taken in user mode joins nothing: it
 * has cookie 0 and its user stack walked in place (PERF_CONTEXT_USER
 * first, then at least its ip).
 */
static struct join join_tid(const struct ring *r, __u32 tid, const __u64 *excuse,
			    int nr_excuse, bool lost_ok)
{
	bool lost = lost_ok && ring_lost_records(r);
	struct join j = { 0 };
	size_t i, k;

	for (i = 0; i < r->nr_rec; i++) {
		const struct ring_record *s = &r->rec[i];
		__u32 other_tid = 0;
		int n = 0, other = 0;
		__u64 nr;

		if (s->type != PERF_RECORD_SAMPLE || s->tid != tid)
			continue;
		j.samples++;
		j.kernel += taken_in_kernel_mode(s);
		if (taken_in_user_mode(s)) {
			j.user++;
			if ((s->cookie || !user_mode_walk(s, &nr) || !nr) &&
			    !j.bad_user++)
				snprintf(j.user_msg, sizeof(j.user_msg),
					 "sample %zu at ip %#llx: cookie %#llx, %llu ips, ips[0] %#llx",
					 i, (unsigned long long)s->ip,
					 (unsigned long long)s->cookie,
					 (unsigned long long)s->nr,
					 s->nr ? (unsigned long long)s->ips[0] : 0ULL);
		}
		if (!s->cookie)
			continue;
		j.deferred++;
		for (k = 0; k < r->nr_rec; k++) {
			const struct ring_record *c = &r->rec[k];

			if (c->type != PERF_RECORD_CALLCHAIN_DEFERRED ||
			    c->cookie != s->cookie)
				continue;
			n++;
			if (c->tid != tid) {
				other++;
				other_tid = c->tid;
			}
		}
		if (n == 1 && !other) {
			j.joined++;
			continue;
		}
		if (!n && (lost || in_list(s->cookie, excuse, nr_excuse))) {
			j.excused++;
			continue;
		}
		if (!j.bad++)
			snprintf(j.msg, sizeof(j.msg),
				 "sample %zu, cookie %#llx: %d records, %d of another tid (%u)",
				 i, (unsigned long long)s->cookie, n, other, other_tid);
	}
	return j;
}

static void expect_joined(struct __test_metadata *_metadata, const char *what,
			  __u32 tid, const struct join *j)
{
	EXPECT_EQ(0, j->bad_user)
		TH_LOG("%s: want tid %u's user-mode samples walked in place, %d of %d not (%s)",
		       what, tid, j->bad_user, j->user, j->user_msg);
	EXPECT_EQ(0, j->bad)
		TH_LOG("%s: want 1 record of tid %u per cookie, %d of %d had not (first: %s)",
		       what, tid, j->bad, j->deferred, j->msg);
	EXPECT_LE(1, j->joined)
		TH_LOG("%s: expected samples of tid %u joined with their records, none of %d",
		       what, tid, j->deferred);
}

/*
 * Wait until the child has exited, without reaping it: a task's pid is
 * released when its parent reaps it, and samples it takes after that (it
 * still runs a little) carry tid -1. Tests disable their events in between.
 * The nr rings r[] are drained meanwhile: an exit under KASAN is sampled
 * hundreds of times, and a full buffer would drop the last records.
 */
static void wait_exited(pid_t child, struct ring *r, int nr)
{
	double deadline = ring_now() + 10;
	siginfo_t info;
	int i;

	do {
		memset(&info, 0, sizeof(info));
		if (!waitid(P_PID, child, &info, WEXITED | WNOWAIT | WNOHANG) &&
		    info.si_pid == child)
			return;
		usleep(1000);
		for (i = 0; i < nr; i++)
			ring_drain(&r[i]);
	} while (ring_now() < deadline);
}

/* Reap child within a few seconds, or kill it; returns its wait status. */

static int reap(pid_t child)
{
	double deadline = ring_now() + 10;
	int status = -1;

	while (waitpid(child, &status, WNOHANG) != child) {
		if (ring_now() > deadline) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			return -1;
		}
		usleep(1000);
	}
	return status;
}

/*
 * cgroup_event_sees_only_its_cgroup: cgroups A and B, one task in each,
 * both pinned to one CPU, and a per-CPU cgroup event on that CPU for each.
 */
struct cgroups {
	char mnt[64];		/* cgroup2, maybe mounted here */
	char dir[2][160];	/* A and B */
	bool made[2];
	bool mounted;
	pid_t child[2];		/* the task in each */
};

static void cgroups_cleanup(struct cgroups *cg)
{
	int i, tries;

	for (i = 0; i < 2; i++) {
		if (cg->child[i] <= 0)
			continue;
		kill(cg->child[i], SIGKILL);
		waitpid(cg->child[i], NULL, 0);
		cg->child[i] = 0;
	}
	for (i = 0; i < 2; i++) {
		/* A cgroup is busy until its dead task is gone from it. */
		for (tries = 0; cg->made[i] && tries < 500; tries++) {
			if (!rmdir(cg->dir[i]) || errno != EBUSY)
				cg->made[i] = false;
			else
				usleep(10000);
		}
	}
	if (cg->mounted) {
		umount2(cg->mnt, MNT_DETACH);
		rmdir(cg->mnt);
		cg->mounted = false;
	}
}

FIXTURE(cgroup2)
{
	struct cgroups cg;
};

/* Enable the pids controller for the children of @mnt, if it has one. */
static void cgroup_enable_some_controller(const char *mnt)
{
	char path[128], buf[256];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/cgroup.controllers", mnt);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	if (!strstr(buf, "pids"))
		return;
	snprintf(path, sizeof(path), "%s/cgroup.subtree_control", mnt);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return;
	/* Already enabled, or not allowed: the open of the event will tell. */
	n = write(fd, "+pids", 5);
	close(fd);
}

FIXTURE_SETUP(cgroup2)
{
	struct cgroups *cg = &self->cg;
	struct statfs sfs;
	int i, err;

	if (!statfs("/sys/fs/cgroup", &sfs) && sfs.f_type == CGROUP2_SUPER_MAGIC) {
		snprintf(cg->mnt, sizeof(cg->mnt), "/sys/fs/cgroup");
	} else {
		/* Mount cgroup2 where only this test sees it. */
		if (unshare(CLONE_NEWNS))
			SKIP(return, "unshare(CLONE_NEWNS): %s", strerror(errno));
		ASSERT_EQ(0, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
			TH_LOG("making the mounts private: %s", strerror(errno));
		snprintf(cg->mnt, sizeof(cg->mnt), "/tmp/%s.XXXXXX", CGROUP_NAME);
		ASSERT_FALSE(!mkdtemp(cg->mnt))
			TH_LOG("mkdtemp %s: %s", cg->mnt, strerror(errno));
		if (mount("none", cg->mnt, "cgroup2", 0, NULL)) {
			err = errno;
			rmdir(cg->mnt);
			SKIP(return, "cannot mount cgroup2: %s", strerror(err));
		}
		cg->mounted = true;
	}
	/*
	 * The root's mask of what its children get is computed anew only
	 * when a controller is enabled there (as a booting system does):
	 * until then, new cgroups miss the implicit perf_event controller.
	 */
	cgroup_enable_some_controller(cg->mnt);
	for (i = 0; i < 2; i++) {
		snprintf(cg->dir[i], sizeof(cg->dir[i]), "%s/%s.%d.%c",
			 cg->mnt, CGROUP_NAME, getpid(), 'a' + i);
		if (!mkdir(cg->dir[i], 0755)) {
			cg->made[i] = true;
			continue;
		}
		err = errno;
		cgroups_cleanup(cg);
		if (err == EPERM || err == EACCES || err == EROFS)
			SKIP(return, "cannot make a cgroup: %s", strerror(err));
		ASSERT_EQ(0, err) TH_LOG("mkdir %s: %s", cg->dir[i], strerror(err));
	}
}

FIXTURE_TEARDOWN(cgroup2)
{
	cgroups_cleanup(&self->cg);
}

static int cgroup_enter(const char *dir, pid_t pid)
{
	char path[192], buf[32];
	int fd, n, ret = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%d\n", pid);
	if (write(fd, buf, n) != n)
		ret = -errno;
	close(fd);
	return ret;
}

/*
 * A child that burns pinned to cpu, from when the go pipe is closed until
 * *stop (or a deadline). Never returns.
 */
static void burn_child(const struct burner *b, const int *stop, int go, int cpu)
{
	double deadline;
	char x;

	if (pin_to(0, cpu))
		_exit(10);
	if (read(go, &x, 1) != 0)
		_exit(11);
	deadline = ring_now() + 4 * RUN_SECONDS;
	while (!__atomic_load_n(stop, __ATOMIC_RELAXED) && ring_now() < deadline)
		if (!burn(b))
			_exit(12);
	_exit(0);
}

TEST_F(cgroup2, cgroup_event_sees_only_its_cgroup)
{
	static const char * const name[2] = { "cgroup A's event", "cgroup B's event" };
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK);
	int cpus[2], n, i, go[2], cgfd, fd, err, status[2];
	struct cgroups *cg = &self->cg;
	__u32 task[2], first = 0;
	struct ring r[2];
	struct burner b;
	double deadline;
	int *stop;

	n = allowed_cpus(cpus, 2);
	ASSERT_LE(1, n);
	/* Keep this process off the sampled CPU when there is another. */
	if (n > 1)
		ASSERT_EQ(0, pin_to(0, cpus[1]));
	burner_init(_metadata, &b);
	stop = mmap(NULL, sizeof(*stop), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_FALSE(stop == MAP_FAILED);
	*stop = 0;

	ASSERT_EQ(0, pipe(go));
	for (i = 0; i < 2; i++) {
		cg->child[i] = fork();
		ASSERT_LE(0, cg->child[i]);
		if (!cg->child[i]) {
			close(go[1]);
			burn_child(&b, stop, go[0], cpus[0]);
		}
		task[i] = cg->child[i];
	}
	close(go[0]);
	for (i = 0; i < 2; i++) {
		err = cgroup_enter(cg->dir[i], cg->child[i]);
		ASSERT_EQ(0, err) TH_LOG("moving task %u into %s: %s",
					 task[i], cg->dir[i], strerror(-err));
	}

	for (i = 0; i < 2; i++) {
		cgfd = open(cg->dir[i], O_RDONLY | O_DIRECTORY);
		ASSERT_LE(0, cgfd) TH_LOG("%s: %s", cg->dir[i], strerror(errno));
		fd = perf_open_flags(&attr, cgfd, cpus[0], PERF_FLAG_PID_CGROUP);
		err = errno;
		close(cgfd);
		if (fd < 0 && err == ENOENT)
			SKIP(return, "no perf_event controller on cgroup2 (bound to cgroup v1?)");
		ASSERT_LE(0, fd) TH_LOG("perf_event_open(cgroup %s, cpu %d): %s",
					cg->dir[i], cpus[0], strerror(err));
		ASSERT_EQ(0, ring_map(&r[i], fd, &attr, DATA_PAGES))
			TH_LOG("mmap: %s", strerror(errno));
	}
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, ioctl(r[i].fd, PERF_EVENT_IOC_ENABLE, 0));

	close(go[1]);		/* the two tasks start */
	deadline = ring_now() + RUN_SECONDS;
	while (ring_now() < deadline) {
		usleep(2000);
		ring_drain(&r[0]);
		ring_drain(&r[1]);
		if (r[0].nr_samples >= WANT_SAMPLES && r[1].nr_samples >= WANT_SAMPLES)
			break;
	}
	__atomic_store_n(stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < 2; i++)
		wait_exited(cg->child[i], r, 2);
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, ioctl(r[i].fd, PERF_EVENT_IOC_DISABLE, 0));
	for (i = 0; i < 2; i++) {
		status[i] = reap(cg->child[i]);
		cg->child[i] = 0;
		ring_drain(&r[i]);
	}
	for (i = 0; i < 2; i++) {
		EXPECT_TRUE(WIFEXITED(status[i]) && !WEXITSTATUS(status[i]))
			TH_LOG("task %u: wait status %#x", task[i], status[i]);
	}

	for (i = 0; i < 2; i++) {
		__u64 excuse = last_cookie(&r[i], task[i]);
		struct join j = join_tid(&r[i], task[i], &excuse, 1, true);
		int others, mine, theirs;

		EXPECT_EQ(0, r[i].nr_malformed)
			TH_LOG("%s: malformed: %s", name[i], r[i].why);
		ASSERT_LE(MIN_SAMPLES, j.samples)
			TH_LOG("%s: expected samples of its task %u on CPU %d, saw %d",
			       name[i], task[i], cpus[0], j.samples);
		others = count_other(&r[i], PERF_RECORD_SAMPLE, task[i], task[i], &first);
		EXPECT_EQ(0, others)
			TH_LOG("%s: want samples of task %u only, saw %d others (first: tid %u%s)",
			       name[i], task[i], others, first,
			       first == task[!i] ? ", the other cgroup's task" : "");
		theirs = count_of(&r[i], PERF_RECORD_CALLCHAIN_DEFERRED, task[!i]);
		EXPECT_EQ(0, theirs)
			TH_LOG("%s: want no records of the other cgroup's task %u, saw %d",
			       name[i], task[!i], theirs);
		others = count_other(&r[i], PERF_RECORD_CALLCHAIN_DEFERRED, task[i],
				     task[i], &first);
		EXPECT_EQ(0, others)
			TH_LOG("%s: want records of task %u only, saw %d others (first: tid %u)",
			       name[i], task[i], others, first);
		mine = count_of(&r[i], PERF_RECORD_CALLCHAIN_DEFERRED, task[i]);
		EXPECT_LE(1, mine)
			TH_LOG("%s: expected records of its task %u, saw none", name[i], task[i]);
		/* Its spins in user mode are walked in place: not counted. */
		EXPECT_LE(j.kernel / 2, j.deferred)
			TH_LOG("%s: want most kernel-mode samples of %u deferred, %d of %d were",
			       name[i], task[i], j.deferred, j.kernel);
		expect_joined(_metadata, name[i], task[i], &j);
		TH_LOG("%s: %d samples of task %u (%d user), %d deferred, %d records, %d joined",
		       name[i], j.samples, task[i], j.user, j.deferred, mine, j.joined);
		TH_LOG("%s: %llu records lost", name[i],
		       (unsigned long long)lost_count(r[i].fd));
	}

	for (i = 0; i < 2; i++)
		close_ring(&r[i]);
	munmap(stop, sizeof(*stop));
	burner_fini(&b);
}

/* tids_in_a_child_pid_namespace */
struct ns_child {
	int stop;
	pid_t pid_in_ns;
	int err;		/* errno of the child's perf_event_open() */
};

static int send_fd(int sock, int fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	char data = 'f';
	struct iovec iov = { .iov_base = &data, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov	= &iov,
		.msg_iovlen	= 1,
		.msg_control	= u.buf,
		.msg_controllen	= sizeof(u.buf),
	};
	struct cmsghdr *c;

	memset(&u, 0, sizeof(u));
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	char data;
	struct iovec iov = { .iov_base = &data, .iov_len = 1 };
	struct msghdr msg = {
		.msg_iov	= &iov,
		.msg_iovlen	= 1,
		.msg_control	= u.buf,
		.msg_controllen	= sizeof(u.buf),
	};
	struct cmsghdr *c;
	int fd;

	if (recvmsg(sock, &msg, 0) != 1)
		return -1;
	c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
		return -1;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/*
 * Pid 1 of the new namespace: open an event on itself, hand it to the
 * parent, burn when told to until told to stop. Never returns.
 */
static void ns_child_main(const struct burner *b, struct ns_child *sh, int sock,
			  struct perf_event_attr *attr)
{
	double deadline;
	int fd;
	char x;

	sh->pid_in_ns = getpid();
	fd = perf_open(attr, 0, -1);
	if (fd < 0) {
		sh->err = errno;
		_exit(10);
	}
	if (send_fd(sock, fd))
		_exit(11);
	if (read(sock, &x, 1) != 1)
		_exit(12);
	deadline = ring_now() + 4 * RUN_SECONDS;
	while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED) && ring_now() < deadline)
		if (!burn(b))
			_exit(13);
	_exit(0);
}

TEST(tids_in_a_child_pid_namespace)
{
	static const char * const name[2] = {
		"the event opened outside the namespace",
		"the event opened inside the namespace",
	};
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK);
	int sv[2], fd, i, status, others, common = 0, differ = 0;
	char msg[160] = "";
	struct ns_child *sh;
	__u32 tid[2], first = 0;
	struct ring r[2];
	struct burner b;
	double deadline;
	pid_t child;
	size_t k, m = 0;

	burner_init(_metadata, &b);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_FALSE(sh == MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));

	if (unshare(CLONE_NEWPID)) {
		if (errno == EPERM || errno == EINVAL)
			SKIP(return, "unshare(CLONE_NEWPID): %s", strerror(errno));
		ASSERT_EQ(0, errno) TH_LOG("unshare(CLONE_NEWPID): %s", strerror(errno));
	}
	child = fork();
	ASSERT_LE(0, child) TH_LOG("fork into the new namespace: %s", strerror(errno));
	if (!child) {
		close(sv[0]);
		ns_child_main(&b, sh, sv[1], &attr);
	}
	close(sv[1]);

	/* r[0]: opened here, outside; r[1]: opened by the child, inside. */
	fd = recv_fd(sv[0]);
	ASSERT_LE(0, fd) TH_LOG("no event from the child (its perf_event_open(): %s)",
				strerror(sh->err));
	ASSERT_EQ(1, sh->pid_in_ns)
		TH_LOG("expected the child to be pid 1 of its namespace, it is %d",
		       sh->pid_in_ns);
	ASSERT_EQ(0, ring_map(&r[1], fd, &attr, DATA_PAGES))
		TH_LOG("mmap of the child's event: %s", strerror(errno));
	open_ring(_metadata, &r[0], &attr, child, -1, DATA_PAGES);
	tid[0] = child;
	tid[1] = 1;

	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, ioctl(r[i].fd, PERF_EVENT_IOC_ENABLE, 0));
	ASSERT_EQ(1, write(sv[0], "g", 1));
	deadline = ring_now() + RUN_SECONDS;
	while (ring_now() < deadline) {
		usleep(2000);
		ring_drain(&r[0]);
		ring_drain(&r[1]);
		if (r[0].nr_samples >= WANT_SAMPLES && r[1].nr_samples >= WANT_SAMPLES)
			break;
	}
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	wait_exited(child, r, 2);
	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, ioctl(r[i].fd, PERF_EVENT_IOC_DISABLE, 0));
	status = reap(child);
	for (i = 0; i < 2; i++)
		ring_drain(&r[i]);
	EXPECT_TRUE(WIFEXITED(status) && !WEXITSTATUS(status))
		TH_LOG("child status %#x", status);

	for (i = 0; i < 2; i++) {
		__u64 excuse = last_cookie(&r[i], tid[i]);
		struct join j = join_tid(&r[i], tid[i], &excuse, 1, true);

		EXPECT_EQ(0, r[i].nr_malformed)
			TH_LOG("%s: malformed: %s", name[i], r[i].why);
		ASSERT_LE(MIN_SAMPLES, j.samples)
			TH_LOG("%s: expected samples of the child as tid %u, saw %d (of %zu)",
			       name[i], tid[i], j.samples, r[i].nr_samples);
		others = count_other(&r[i], PERF_RECORD_SAMPLE, tid[i], tid[i], &first);
		EXPECT_EQ(0, others)
			TH_LOG("%s: want samples with pid = tid = %u, %d were not (first: tid %u)",
			       name[i], tid[i], others, first);
		others = count_other(&r[i], PERF_RECORD_CALLCHAIN_DEFERRED, tid[i],
				     tid[i], &first);
		EXPECT_EQ(0, others)
			TH_LOG("%s: want records with pid = tid = %u, %d were not (first: tid %u)",
			       name[i], tid[i], others, first);
		expect_joined(_metadata, name[i], tid[i], &j);
		TH_LOG("%s: %d samples as tid %u (%d in user mode), %d deferred, %d joined",
		       name[i], j.samples, tid[i], j.user, j.deferred, j.joined);
	}

	/* One walk per stay: both buffers got the same user stack. */
	for (k = 0; k < r[0].nr_rec; k++) {
		const struct ring_record *a = &r[0].rec[k];
		const struct ring_record *c;

		if (a->type != PERF_RECORD_CALLCHAIN_DEFERRED ||
		    records_of_cookie(&r[1], a->cookie, &m) != 1)
			continue;
		common++;
		c = &r[1].rec[m];
		if (a->nr == c->nr && (!a->nr || !memcmp(a->ips, c->ips, a->nr * 8)))
			continue;
		if (!differ++)
			snprintf(msg, sizeof(msg), "cookie %#llx: %llu and %llu ips",
				 (unsigned long long)a->cookie,
				 (unsigned long long)a->nr, (unsigned long long)c->nr);
	}
	EXPECT_LE(1, common)
		TH_LOG("expected cookies with a record in both buffers, saw none");
	EXPECT_EQ(0, differ)
		TH_LOG("want one stack per cookie in both buffers, %d of %d differ (first: %s)",
		       differ, common, msg);

	for (i = 0; i < 2; i++)
		close_ring(&r[i]);
	close(sv[0]);
	munmap(sh, sizeof(*sh));
	burner_fini(&b);
}

/* paused_buffer_counts_the_record_lost: a thread that blocks when told. */
struct blocker {
	int sock;
	int cpu;
	pid_t tid;
	int err;
	int step;		/* 1, 2: block in recv() now; 3: return */
	int done;		/* recv() calls that returned */
};

static void *blocker_main(void *arg)
{
	struct blocker *b = arg;
	char x;
	int k;

	b->err = pin_to(0, b->cpu);
	__atomic_store_n(&b->tid, b->err ? -1 : gettid_(), __ATOMIC_RELEASE);
	if (b->err)
		return NULL;
	for (k = 1; k <= 3; k++) {
		while (__atomic_load_n(&b->step, __ATOMIC_ACQUIRE) < k)
			asm volatile("pause" ::: "memory");
		if (k == 3 || recv(b->sock, &x, 1, 0) != 1)
			break;
		__atomic_store_n(&b->done, k, __ATOMIC_RELEASE);
	}
	return NULL;
}

static bool wait_done(const struct blocker *b, int done)
{
	double deadline = ring_now() + 5;

	while (__atomic_load_n(&b->done, __ATOMIC_ACQUIRE) < done) {
		if (ring_now() > deadline)
			return false;
		usleep(1000);
	}
	return true;
}

/*
 * Wait until tid blocks voluntarily (more than "seen" times) and its
 * buffer settles; return the index of its last sample after record
 * "from", -1 if there is none.
 */
static long blocked_sample(struct ring *r, pid_t tid, long seen, size_t from)
{
	double deadline = ring_now() + 5;
	size_t i, n;

	if (!wait_blocked(tid, seen))
		return -1;
	do {
		n = r->nr_rec;
		usleep(20000);
		ring_drain(r);
	} while (r->nr_rec != n && ring_now() < deadline);
	for (i = r->nr_rec; i-- > from;)
		if (r->rec[i].type == PERF_RECORD_SAMPLE && r->rec[i].tid == (__u32)tid)
			return i;
	return -1;
}

/*
 * A context-switch event samples the thread as it blocks in recv(); the
 * buffer is paused, the thread woken: its record comes while paused and is
 * the one thing lost (unless the thread is switched out meanwhile).
 */
static void pause_one_record(struct __test_metadata *_metadata)
{
	struct perf_event_attr attr =
		sw_sample_attr(PERF_COUNT_SW_CONTEXT_SWITCHES, 1, true);
	__u64 id, c1, c2, t0, t1, lost_paused, lost_total, lost_sum = 0;
	long i1, i2, v, sw_p, sw_b;
	int cpus[2], n, sv[2], nr_lost = 0, in_pause = 0, nrec;
	struct blocker b = { 0 };
	size_t i, lost_at = 0, rec = 0;
	pthread_t th;
	struct ring r;

	attr.read_format = PERF_FORMAT_LOST;
	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	n = allowed_cpus(cpus, 2);
	ASSERT_LE(1, n);
	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
	b.sock = sv[0];
	b.cpu = cpus[0];
	if (n > 1)
		ASSERT_EQ(0, pin_to(0, cpus[1]));
	ASSERT_EQ(0, pthread_create(&th, NULL, blocker_main, &b));
	while (!__atomic_load_n(&b.tid, __ATOMIC_ACQUIRE))
		usleep(1000);
	ASSERT_LT(0, b.tid) TH_LOG("pinning to CPU %d: %s", b.cpu, strerror(-b.err));

	open_ring(_metadata, &r, &attr, b.tid, -1, DATA_PAGES);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ID, &id));
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));

	/* The thread blocks: the sample of its switch is in the buffer. */
	v = voluntary_switches(b.tid);
	__atomic_store_n(&b.step, 1, __ATOMIC_RELEASE);
	i1 = blocked_sample(&r, b.tid, v, 0);
	ASSERT_LE(0, i1) TH_LOG("expected a sample of the thread blocking in recv()");
	c1 = r.rec[i1].cookie;
	ASSERT_NE(0, c1) TH_LOG("expected a cookie on the sample of the blocking thread");

	/* Paused, the thread wakes up: its record comes now. */
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1));
	t0 = mono_ns();
	sw_p = all_switches(b.tid);
	ASSERT_EQ(1, write(sv[1], "x", 1));
	ASSERT_TRUE(wait_done(&b, 1)) TH_LOG("the thread did not return from recv()");
	lost_paused = lost_count(r.fd);
	sw_b = all_switches(b.tid);
	t1 = mono_ns();
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 0));

	/* Resumed: once more, recorded this time. */
	ring_drain(&r);
	v = voluntary_switches(b.tid);
	__atomic_store_n(&b.step, 2, __ATOMIC_RELEASE);
	i2 = blocked_sample(&r, b.tid, v, r.nr_rec);
	ASSERT_LE(0, i2) TH_LOG("expected a sample of the second block, after the pause");
	c2 = r.rec[i2].cookie;
	ASSERT_EQ(1, write(sv[1], "y", 1));
	ASSERT_TRUE(wait_done(&b, 2)) TH_LOG("the thread did not return from recv()");
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	__atomic_store_n(&b.step, 3, __ATOMIC_RELEASE);
	ASSERT_EQ(0, pthread_join(th, NULL));
	ring_drain(&r);
	lost_total = lost_count(r.fd);

	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);
	nrec = records_of_cookie(&r, c1, &rec);
	EXPECT_EQ(0, nrec)
		TH_LOG("want cookie %#llx's record, written while paused, lost; saw it at %zu",
		       (unsigned long long)c1, rec);
	if (sw_b == sw_p) {
		EXPECT_EQ(1, lost_paused)
			TH_LOG("expected the one lost record counted, read() says %llu lost",
			       (unsigned long long)lost_paused);
	} else {
		/* Each switch of the thread while paused lost a sample, too. */
		EXPECT_LE(1, lost_paused)
			TH_LOG("expected the lost record counted, read() says none");
		EXPECT_GE((__u64)(1 + sw_b - sw_p), lost_paused)
			TH_LOG("%llu lost while paused, for 1 record and %ld switches",
			       (unsigned long long)lost_paused, sw_b - sw_p);
	}

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type == PERF_RECORD_LOST) {
			nr_lost++;
			lost_sum += rr->lost;
			lost_at = i;
			EXPECT_EQ(id, rr->id)
				TH_LOG("PERF_RECORD_LOST of id %llu, expected %llu",
				       (unsigned long long)rr->id, (unsigned long long)id);
		} else if (rr->time >= t0 && rr->time <= t1) {
			in_pause++;
		}
	}
	EXPECT_EQ(1, nr_lost)
		TH_LOG("expected one PERF_RECORD_LOST after the pause, saw %d", nr_lost);
	/*
	 * Records lost after the pause (a reader too slow on a loaded
	 * machine) are told by the next record written, which may never
	 * come once the event is disabled: read() can count more.
	 */
	EXPECT_LE(lost_sum, lost_total)
		TH_LOG("PERF_RECORD_LOST counts %llu lost, read() only %llu",
		       (unsigned long long)lost_sum, (unsigned long long)lost_total);
	EXPECT_LE(lost_paused, lost_sum)
		TH_LOG("PERF_RECORD_LOST counts %llu lost, %llu were lost while paused",
		       (unsigned long long)lost_sum, (unsigned long long)lost_paused);
	EXPECT_TRUE(nr_lost && lost_at > (size_t)i1 && lost_at < (size_t)i2)
		TH_LOG("want PERF_RECORD_LOST between samples %ld and %ld, at %zu",
		       i1, i2, lost_at);
	EXPECT_EQ(0, in_pause)
		TH_LOG("want nothing written while paused, saw %d records", in_pause);

	EXPECT_NE(0, c2) TH_LOG("expected a cookie on the sample of the second block");
	EXPECT_NE(c1, c2) TH_LOG("two blocks, one cookie %#llx", (unsigned long long)c1);
	nrec = records_of_cookie(&r, c2, &rec);
	EXPECT_EQ(1, nrec)
		TH_LOG("expected the record of cookie %#llx after resuming, saw %d",
		       (unsigned long long)c2, nrec);
	if (nrec == 1) {
		EXPECT_EQ((__u32)b.tid, r.rec[rec].tid);
		EXPECT_LT((size_t)i2, rec)
			TH_LOG("want the record after its sample %ld, at %zu", i2, rec);
	}
	TH_LOG("one blocked stay: %llu lost while paused, %ld switches meanwhile",
	       (unsigned long long)lost_paused, sw_b - sw_p);

	close_ring(&r);
	close(sv[0]);
	close(sv[1]);
}

/* The thread pauses its own buffer for a while, sampled all along. */
static void pause_while_sampled(struct __test_metadata *_metadata)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK);
	__u64 id, t0, t1, lost_paused, lost_total, lost_sum = 0, excuse[2] = { 0, 0 };
	int nr_lost = 0, in_pause = 0, joined_after = 0;
	size_t i, first_after = SIZE_MAX, rec;
	__u32 tid = gettid_();
	struct burner b;
	struct join j;
	struct ring r;

	attr.use_clockid = 1;
	attr.clockid = CLOCK_MONOTONIC;
	burner_init(_metadata, &b);
	open_ring(_metadata, &r, &attr, 0, -1, DATA_PAGES);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ID, &id));
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));

	burn_for(&b, &r, PHASE_SECONDS);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1));
	t0 = mono_ns();
	burn_for(&b, NULL, PHASE_SECONDS);
	t1 = mono_ns();
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 0));
	lost_paused = lost_count(r.fd);
	burn_for(&b, &r, PHASE_SECONDS);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	lost_total = lost_count(r.fd);

	EXPECT_EQ(0, r.nr_malformed) TH_LOG("malformed: %s", r.why);
	EXPECT_LT(0, lost_paused)
		TH_LOG("expected the samples taken while paused counted lost, read() says none");
	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type == PERF_RECORD_LOST) {
			nr_lost++;
			lost_sum += rr->lost;
			EXPECT_EQ(id, rr->id);
		} else if (rr->time >= t0 && rr->time <= t1) {
			in_pause++;
		}
		if (rr->time >= t0 && first_after == SIZE_MAX)
			first_after = i;
		/* The stay that ended while paused: its record is lost. */
		if (rr->type == PERF_RECORD_SAMPLE && rr->tid == tid && rr->time < t0)
			excuse[0] = rr->cookie;
	}
	excuse[1] = last_cookie(&r, tid);
	EXPECT_EQ(0, in_pause)
		TH_LOG("want nothing written while paused, saw %d records", in_pause);
	/*
	 * One for the pause; more when the reader fell behind after it, on
	 * a loaded machine (the buffer is full of what the pause left): the
	 * records those report are excused below, and only then.
	 */
	EXPECT_LE(1, nr_lost)
		TH_LOG("expected a PERF_RECORD_LOST after the pause, saw %d", nr_lost);
	if (nr_lost > 1)
		TH_LOG("%d PERF_RECORD_LOST: the reader fell behind after the pause",
		       nr_lost);
	ASSERT_NE(SIZE_MAX, first_after) TH_LOG("expected records after the pause");
	EXPECT_EQ(PERF_RECORD_LOST, r.rec[first_after].type)
		TH_LOG("want the first record after the pause to be PERF_RECORD_LOST, saw type %u",
		       r.rec[first_after].type);
	/*
	 * Records lost after the pause (a reader too slow on a loaded
	 * machine) are told by the next record written, which may never
	 * come once the event is disabled: read() can count more.
	 */
	EXPECT_LE(lost_sum, lost_total)
		TH_LOG("PERF_RECORD_LOST counts %llu lost, read() only %llu",
		       (unsigned long long)lost_sum, (unsigned long long)lost_total);
	EXPECT_LE(lost_paused, lost_sum)
		TH_LOG("PERF_RECORD_LOST counts %llu lost, %llu were lost while paused",
		       (unsigned long long)lost_sum, (unsigned long long)lost_paused);

	j = join_tid(&r, tid, excuse, 2, nr_lost > 1);
	ASSERT_LE(MIN_SAMPLES, j.samples) TH_LOG("expected samples, saw %d", j.samples);
	expect_joined(_metadata, "the paused buffer", tid, &j);
	for (i = first_after; i < r.nr_rec; i++)
		joined_after += r.rec[i].type == PERF_RECORD_SAMPLE &&
				r.rec[i].cookie && r.rec[i].tid == tid &&
				records_of_cookie(&r, r.rec[i].cookie, &rec) == 1;
	EXPECT_LE(1, joined_after)
		TH_LOG("expected samples after the pause joined with their records, saw none");
	TH_LOG("sampled syscalls: %llu lost while paused, %d samples, %d joined (%d after)",
	       (unsigned long long)lost_paused, j.samples, j.joined, joined_after);

	close_ring(&r);
	burner_fini(&b);
}

TEST(paused_buffer_counts_the_record_lost)
{
	pause_one_record(_metadata);
	pause_while_sampled(_metadata);
}

/*
 * Read a backward buffer from its newest record (data_head) towards older
 * ones, up to the oldest whole record. *wrapped: older data was overwritten.
 */
static void ring_read_backward(struct ring *r, bool *wrapped)
{
	__u64 head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	__u64 end, pos = head;

	/* Backward, data_head goes down from 0: -head bytes were written. */
	*wrapped = -head > r->data_size;
	end = *wrapped ? head + r->data_size : 0;
	while (end - pos >= sizeof(struct perf_event_header)) {
		struct perf_event_header hdr;

		ring_copy(r, &hdr, pos, sizeof(hdr));
		/* The oldest record may be cut by the newest: the end. */
		if (*wrapped && hdr.size > end - pos)
			break;
		if (hdr.size < sizeof(hdr) || hdr.size % 8 || hdr.size > end - pos) {
			if (!r->nr_malformed++)
				snprintf(r->why, sizeof(r->why),
					 "header size %u at offset %llu from data_head",
					 hdr.size, (unsigned long long)(pos - head));
			break;
		}
		if (!ring_append(r, &hdr, pos))
			break;
		pos += hdr.size;
	}
}

TEST(backward_buffer_gets_records)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK);
	long page = sysconf(_SC_PAGESIZE);
	int records = 0, bad_misc = 0, dup = 0;
	__u32 tid = gettid_(), first = 0;
	__u64 excuse[2] = { 0, 0 }, written;
	bool wrapped = false;
	int sampled = 0;
	struct burner b;
	double deadline;
	struct join j;
	struct ring r;
	size_t i, k;

	attr.write_backward = 1;
	burner_init(_metadata, &b);
	memset(&r, 0, sizeof(r));
	r.fd = perf_open(&attr, 0, -1);
	ASSERT_LE(0, r.fd) TH_LOG("perf_event_open(write_backward): %s", strerror(errno));
	r.sample_type = attr.sample_type;
	r.sample_id_all = true;
	r.keep_tail = true;
	r.data_size = BACKWARD_PAGES * page;
	r.map_size = r.data_size + page;
	/* Read-only: the kernel overwrites the oldest data. */
	r.meta = mmap(NULL, r.map_size, PROT_READ, MAP_SHARED, r.fd, 0);
	ASSERT_FALSE(r.meta == MAP_FAILED) TH_LOG("mmap: %s", strerror(errno));
	r.data = (char *)r.meta + page;

	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0));
	deadline = ring_now() + RUN_SECONDS;
	do {
		burn(&b);
		written = -__atomic_load_n(&r.meta->data_head, __ATOMIC_ACQUIRE);
	} while (written < BACKWARD_WRAPS * r.data_size && ring_now() < deadline);
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));

	ring_read_backward(&r, &wrapped);
	ASSERT_TRUE(wrapped)
		TH_LOG("expected the %zu bytes of buffer overwritten, %llu bytes written",
		       r.data_size, (unsigned long long)written);
	EXPECT_EQ(0, r.nr_malformed)
		TH_LOG("want whole records back from data_head, saw %s", r.why);

	/*
	 * rec[0] is the newest. The newest stay may have no record (sampling
	 * stopped in it), the oldest one's record may be older than its
	 * samples (taken after its walk), overwritten. A newest or oldest
	 * sample taken in user mode (cookie 0) excuses nothing: no stay was
	 * under way then.
	 */
	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type == PERF_RECORD_SAMPLE && rr->tid == tid) {
			if (!sampled++)
				excuse[0] = rr->cookie;
			excuse[1] = rr->cookie;
		}
		if (rr->type != PERF_RECORD_CALLCHAIN_DEFERRED)
			continue;
		records++;
		if ((rr->misc & PERF_RECORD_MISC_CPUMODE_MASK) != PERF_RECORD_MISC_USER)
			bad_misc++;
		if (records_of_cookie(&r, rr->cookie, &k) > 1)
			dup++;
	}
	j = join_tid(&r, tid, excuse, 2, false);
	ASSERT_LE(MIN_SAMPLES, j.samples)
		TH_LOG("expected samples in the newest %zu bytes, saw %d",
		       r.data_size, j.samples);
	EXPECT_LE(1, records) TH_LOG("expected records in the backward buffer, saw none");
	EXPECT_EQ(0, dup) TH_LOG("want 1 record per cookie, %d records have another", dup);
	EXPECT_EQ(0, bad_misc) TH_LOG("want PERF_RECORD_MISC_USER, %d records had not", bad_misc);
	EXPECT_EQ(0, count_other(&r, PERF_RECORD_CALLCHAIN_DEFERRED, tid, getpid(), &first))
		TH_LOG("expected records of this thread only, saw tid %u", first);
	expect_joined(_metadata, "the backward buffer", tid, &j);
	TH_LOG("%zu records in the newest %zu bytes of %llu: %d samples, %d joined, %d records",
	       r.nr_rec, r.data_size, (unsigned long long)written, j.samples,
	       j.joined, records);

	munmap(r.meta, r.map_size);
	r.meta = NULL;
	close_ring(&r);
	burner_fini(&b);
}

/* Queue a readv() of b's iovec, forced to an io-wq worker. */
static void uring_queue_readv(struct uring *u, const struct burner *b, __u64 data)
{
	unsigned int tail = *u->sq_tail, idx = tail & *u->sq_mask;
	struct io_uring_sqe *sqe = &u->sqes[idx];

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_READV;
	sqe->flags = IOSQE_ASYNC;
	sqe->fd = b->zero_fd;
	sqe->addr = (unsigned long)b->iov;
	sqe->len = b->iovcnt;
	sqe->user_data = data;
	u->sq_array[idx] = idx;
	__atomic_store_n(u->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

static long uring_enter(struct uring *u, unsigned int submit, unsigned int wait)
{
	return syscall(__NR_io_uring_enter, u->fd, submit, wait,
		       wait ? IORING_ENTER_GETEVENTS : 0, NULL, 0);
}

/* Reap the completions; returns how many, *bad: how many failed. */
static int uring_reap(struct uring *u, const struct burner *b, int *bad)
{
	unsigned int head = *u->cq_head;
	unsigned int tail = __atomic_load_n(u->cq_tail, __ATOMIC_ACQUIRE);
	int n = 0;

	for (; head != tail; head++, n++)
		if (u->cqes[head & *u->cq_mask].res != (__s32)b->len)
			(*bad)++;
	__atomic_store_n(u->cq_head, head, __ATOMIC_RELEASE);
	return n;
}

static bool has_tid(const pid_t *tids, int n, __u32 tid)
{
	int i;

	for (i = 0; i < n; i++)
		if ((__u32)tids[i] == tid)
			return true;
	return false;
}

/* Add the tids of this process's io-wq workers (iou-wrk-*) to tids[]. */
static void find_workers(pid_t *tids, int *n, int max)
{
	char path[300], comm[32];
	struct dirent *e;
	DIR *d;
	FILE *f;
	pid_t t;

	d = opendir("/proc/self/task");
	if (!d)
		return;
	while ((e = readdir(d)) && *n < max) {
		t = atoi(e->d_name);
		if (t <= 0 || has_tid(tids, *n, t))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "iou-wrk-", 8))
			tids[(*n)++] = t;
		fclose(f);
	}
	closedir(d);
}

/* Samples of this process by another thread than tid: io-wq workers. */
static int worker_samples(const struct ring *r, __u32 pid, __u32 tid)
{
	size_t i;
	int n = 0;

	for (i = 0; i < r->nr_rec; i++)
		n += r->rec[i].type == PERF_RECORD_SAMPLE && r->rec[i].pid == pid &&
		     r->rec[i].tid != tid;
	return n;
}

TEST(io_uring_workers_are_not_deferred)
{
	static const char * const name[2] = {
		"the per-CPU event", "the inherited per-task event",
	};
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_CPU_CLOCK);
	int cpu, fd, i, nw = 0, bad_cqe = 0, reaped = 0, rounds = 0, err;
	__u32 me = gettid_(), pid = getpid();
	pid_t workers[MAX_WORKERS];
	struct burner b;
	double deadline;
	struct ring r[2];
	struct uring u;
	cpu_set_t set;
	long ret;
	size_t k;

	/* This thread, its workers and the two events: all on one CPU. */
	ASSERT_EQ(1, allowed_cpus(&cpu, 1));
	ASSERT_EQ(0, pin_to(0, cpu));
	burner_init(_metadata, &b);
	fd = perf_open(&attr, -1, cpu);
	if (fd < 0 && (errno == EACCES || errno == EPERM))
		SKIP(return, "a per-CPU event needs privileges (%s)", strerror(errno));
	ASSERT_LE(0, fd) TH_LOG("perf_event_open(cpu %d): %s", cpu, strerror(errno));
	ASSERT_EQ(0, ring_map(&r[0], fd, &attr, DATA_PAGES))
		TH_LOG("mmap: %s", strerror(errno));
	/* Inherited by the workers this thread creates: opened before them. */
	attr.inherit = 1;
	open_ring(_metadata, &r[1], &attr, 0, cpu, DATA_PAGES);

	err = uring_setup(&u, 16);
	if (err && access("/proc/sys/kernel/io_uring_disabled", F_OK))
		SKIP(return, "no io_uring in this kernel (%s)", strerror(-err));
	if (err == -EPERM)
		SKIP(return, "io_uring_setup: %s (kernel.io_uring_disabled)", strerror(-err));
	ASSERT_EQ(0, err) TH_LOG("io_uring setup: %s", strerror(-err));
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	ret = syscall(__NR_io_uring_register, u.fd, IORING_REGISTER_IOWQ_AFF, &set,
		      sizeof(set));
	ASSERT_EQ(0, ret) TH_LOG("IORING_REGISTER_IOWQ_AFF to CPU %d: %s", cpu,
				 strerror(errno));

	for (i = 0; i < 2; i++)
		ASSERT_EQ(0, ioctl(r[i].fd, PERF_EVENT_IOC_ENABLE, 0));
	deadline = ring_now() + RUN_SECONDS;
	do {
		for (i = 0; i < URING_QUEUE; i++)
			uring_queue_readv(&u, &b, i);
		ret = uring_enter(&u, URING_QUEUE, 0);
		ASSERT_EQ(URING_QUEUE, ret) TH_LOG("io_uring_enter: %s", strerror(errno));
		burn(&b);		/* this thread's own samples */
		ret = uring_enter(&u, 0, URING_QUEUE);
		ASSERT_LE(0, ret) TH_LOG("io_uring_enter(GETEVENTS): %s", strerror(errno));
		reaped += uring_reap(&u, &b, &bad_cqe);
		find_workers(workers, &nw, MAX_WORKERS);
		ring_drain(&r[0]);
		ring_drain(&r[1]);
		rounds++;
	} while (ring_now() < deadline &&
		 (count_of(&r[0], PERF_RECORD_SAMPLE, me) < WANT_SAMPLES ||
		  worker_samples(&r[0], pid, me) < WANT_SAMPLES));
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, ioctl(r[i].fd, PERF_EVENT_IOC_DISABLE, 0));
		ring_drain(&r[i]);
	}
	find_workers(workers, &nw, MAX_WORKERS);
	uring_close(&u);

	EXPECT_EQ(0, bad_cqe)
		TH_LOG("%d of %d io_uring reads of %zu bytes of /dev/zero failed",
		       bad_cqe, reaped, b.len);
	EXPECT_LE(1, nw)
		TH_LOG("expected io-wq workers (iou-wrk-*) for IOSQE_ASYNC reads, found none");

	for (i = 0; i < 2; i++) {
		__u64 excuse = last_cookie(&r[i], me);
		struct join j = join_tid(&r[i], me, &excuse, 1, true);
		int samples = 0, cookies = 0, records = 0;
		char msg[128] = "";

		for (k = 0; k < r[i].nr_rec; k++) {
			const struct ring_record *rr = &r[i].rec[k];
			bool worker = (rr->pid == pid && rr->tid != me) ||
				      has_tid(workers, nw, rr->tid);

			if (!worker)
				continue;
			if (rr->type == PERF_RECORD_SAMPLE) {
				samples++;
				if (rr->cookie && !cookies++)
					snprintf(msg, sizeof(msg), "tid %u, cookie %#llx",
						 rr->tid, (unsigned long long)rr->cookie);
			} else if (rr->type == PERF_RECORD_CALLCHAIN_DEFERRED) {
				if (!records++)
					snprintf(msg, sizeof(msg), "record of tid %u, cookie %#llx",
						 rr->tid, (unsigned long long)rr->cookie);
			}
		}
		EXPECT_EQ(0, r[i].nr_malformed)
			TH_LOG("%s: malformed: %s", name[i], r[i].why);
		ASSERT_LE(MIN_SAMPLES, j.samples)
			TH_LOG("%s: expected samples of the submitting thread %u, saw %d",
			       name[i], me, j.samples);
		/* Its spins in user mode are walked in place: not counted. */
		EXPECT_LE(j.kernel / 2, j.deferred)
			TH_LOG("%s: want the submitter's kernel samples deferred, %d of %d were",
			       name[i], j.deferred, j.kernel);
		expect_joined(_metadata, name[i], me, &j);
		EXPECT_EQ(0, cookies)
			TH_LOG("%s: want cookie 0 on worker samples, %d of %d had one (first: %s)",
			       name[i], cookies, samples, msg);
		EXPECT_EQ(0, records)
			TH_LOG("%s: want no record of an io-wq worker, saw %d (first: %s)",
			       name[i], records, msg);
		if (!samples)
			TH_LOG("%s: the %d workers got no samples: their records alone checked",
			       name[i], nw);
		TH_LOG("%s: %d rounds, %d workers, %d worker samples; %d samples, %d joined",
		       name[i], rounds, nw, samples, j.samples, j.joined);
	}

	for (i = 0; i < 2; i++)
		close_ring(&r[i]);
	burner_fini(&b);
}

/*
 * An event that took samples in a stay and stopped observing the task
 * before the walk still gets the stay's record: it was allowed to see that
 * stack. PERF_EVENT_IOC_REFRESH lets the event take REFRESH_SAMPLES samples
 * and disables it, in the middle of a long readv(); the record of that
 * stay comes to its buffer all the same. (A disabled event got nothing,
 * and the samples stayed without record.)
 */
#define REFRESH_SAMPLES		3
#define REFRESH_ROUNDS		20

TEST(disabled_event_still_gets_the_record_of_its_samples)
{
	struct perf_event_attr attr = clock_attr(PERF_COUNT_SW_TASK_CLOCK);
	__u32 tid = gettid_();
	int round, deferred = 0, unresolved = 0;
	__u64 first_cookie = 0;
	struct burner b;
	struct ring r;
	size_t i, at;

	burner_init(_metadata, &b);
	open_ring(_metadata, &r, &attr, 0, -1, DATA_PAGES);
	for (round = 0; round < REFRESH_ROUNDS; round++) {
		ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_REFRESH, REFRESH_SAMPLES))
			TH_LOG("PERF_EVENT_IOC_REFRESH: %s", strerror(errno));
		ASSERT_TRUE(burn(&b));
		ring_drain(&r);
	}
	ASSERT_EQ(0, ioctl(r.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&r);
	ASSERT_EQ(0, r.nr_malformed) TH_LOG("malformed records: %s", r.why);

	for (i = 0; i < r.nr_rec; i++) {
		const struct ring_record *rr = &r.rec[i];

		if (rr->type != PERF_RECORD_SAMPLE || rr->tid != tid || !rr->cookie)
			continue;
		deferred++;
		if (records_of_cookie(&r, rr->cookie, &at) != 1 && !unresolved++)
			first_cookie = rr->cookie;
	}
	TH_LOG("%d rounds of %d samples: %d deferred samples, %d without their record",
	       REFRESH_ROUNDS, REFRESH_SAMPLES, deferred, unresolved);
	ASSERT_LE(REFRESH_ROUNDS, deferred)
		TH_LOG("expected a deferred sample in each round's readv(), saw %d", deferred);
	EXPECT_EQ(0, unresolved)
		TH_LOG("%d samples of the disabled event not joined (first: cookie %#llx)",
		       unresolved, (unsigned long long)first_cookie);

	close_ring(&r);
	burner_fini(&b);
}

/*
 * event_enabled_after_the_walk_walks_in_place: a thread waits in one
 * io_uring_enter() for three pipe reads. io_uring runs the task's task work
 * in its wait loop, the deferred walk included, before the system call
 * returns: the stay goes on after its walk. An event enabled then samples
 * the thread the next time it blocks; its buffer never gets that stay's
 * record, so the sample must carry its user stack itself.
 */
struct uring_waiter {
	struct uring u;
	int pipes[3][2];
	char buf[3];
	pid_t tid;
	int go;
	long ret;
	unsigned long site;	/* the user ip after the syscall instruction */
};

static __attribute__((noipa)) long uring_wait_three(struct uring_waiter *w)
{
	return raw_syscall(w->site, __NR_io_uring_enter, w->u.fd, 3, 3,
			   IORING_ENTER_GETEVENTS, 0, 0);
}

static void *uring_waiter_main(void *arg)
{
	struct uring_waiter *w = arg;

	__atomic_store_n(&w->tid, gettid_(), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&w->go, __ATOMIC_ACQUIRE))
		asm volatile("pause" ::: "memory");
	w->ret = uring_wait_three(w);
	return NULL;
}

static void uring_queue_read(struct uring *u, int fd, char *buf, __u64 data)
{
	unsigned int tail = *u->sq_tail, idx = tail & *u->sq_mask;
	struct io_uring_sqe *sqe = &u->sqes[idx];

	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_READ;
	sqe->fd = fd;
	sqe->addr = (unsigned long)buf;
	sqe->len = 1;
	sqe->user_data = data;
	u->sq_array[idx] = idx;
	__atomic_store_n(u->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

/* Wait until tid has blocked more than seen times, in io_uring_enter(). */
static bool blocked_in_uring(pid_t tid, long seen)
{
	double deadline = ring_now() + 5;
	char path[64], line[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	for (;;) {
		if (voluntary_switches(tid) > seen) {
			f = fopen(path, "r");
			if (f) {
				if (!fgets(line, sizeof(line), f))
					line[0] = 0;
				fclose(f);
			}
			if (atoi(line) == __NR_io_uring_enter)
				return true;
		}
		if (ring_now() > deadline)
			return false;
		usleep(1000);
	}
}

/* The index of tid's record whose walk starts at ip, -1 if none. */
static long record_at(const struct ring *r, pid_t tid, __u64 ip)
{
	size_t i;

	for (i = 0; i < r->nr_rec; i++) {
		const struct ring_record *rr = &r->rec[i];

		if (rr->type == PERF_RECORD_CALLCHAIN_DEFERRED &&
		    rr->tid == (__u32)tid && rr->nr && rr->ips[0] == ip)
			return i;
	}
	return -1;
}

/* Whether the user part of sample s starts at ip. */
static bool user_part_at(const struct ring_record *s, __u64 ip)
{
	__u64 i;

	for (i = 0; i + 1 < s->nr; i++)
		if (s->ips[i] == PERF_CONTEXT_USER)
			return s->ips[i + 1] == ip;
	return false;
}

TEST(event_enabled_after_the_walk_walks_in_place)
{
	struct perf_event_attr attr =
		sw_sample_attr(PERF_COUNT_SW_CONTEXT_SWITCHES, 1, true);
	int i, err, before = 0, in_place = 0, joined = 0, missing = 0;
	struct uring_waiter w = { 0 };
	struct ring early, late;
	__u64 cookie, missed = 0;
	double deadline;
	long v0, at;
	pthread_t th;
	size_t k, first;
	char x = 'x';

	err = uring_setup(&w.u, 4);
	if (err && access("/proc/sys/kernel/io_uring_disabled", F_OK))
		SKIP(return, "no io_uring in this kernel (%s)", strerror(-err));
	if (err == -EPERM)
		SKIP(return, "io_uring_setup: %s (kernel.io_uring_disabled)", strerror(-err));
	ASSERT_EQ(0, err) TH_LOG("io_uring setup: %s", strerror(-err));
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(0, pipe(w.pipes[i]));
		uring_queue_read(&w.u, w.pipes[i][0], &w.buf[i], i);
	}
	ASSERT_EQ(0, pthread_create(&th, NULL, uring_waiter_main, &w));
	while (!__atomic_load_n(&w.tid, __ATOMIC_ACQUIRE))
		usleep(1000);

	/* early samples the thread from the start, late only after the walk. */
	open_ring(_metadata, &early, &attr, w.tid, -1, DATA_PAGES);
	open_ring(_metadata, &late, &attr, w.tid, -1, DATA_PAGES);
	ASSERT_EQ(0, ioctl(early.fd, PERF_EVENT_IOC_ENABLE, 0));
	v0 = voluntary_switches(w.tid);
	__atomic_store_n(&w.go, 1, __ATOMIC_RELEASE);

	/* Asleep; then the first read completes and the walk runs. */
	ASSERT_TRUE(blocked_in_uring(w.tid, v0))
		TH_LOG("the thread did not block in io_uring_enter()");
	ASSERT_EQ(1, write(w.pipes[0][1], &x, 1));
	deadline = ring_now() + 5;
	do {
		usleep(1000);
		ring_drain(&early);
		at = record_at(&early, w.tid, w.site);
	} while (at < 0 && ring_now() < deadline);
	ASSERT_LE(0, at) TH_LOG("no record of the walk inside io_uring_enter() at %#lx",
				w.site);
	cookie = early.rec[at].cookie;

	/* Asleep again in the same stay: late sees it block from now on. */
	ASSERT_TRUE(blocked_in_uring(w.tid, v0 + 1));
	ASSERT_EQ(0, ioctl(late.fd, PERF_EVENT_IOC_ENABLE, 0));
	v0 = voluntary_switches(w.tid);
	ASSERT_EQ(1, write(w.pipes[1][1], &x, 1));
	ASSERT_TRUE(blocked_in_uring(w.tid, v0));
	ASSERT_EQ(1, write(w.pipes[2][1], &x, 1));
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_EQ(3, w.ret) TH_LOG("io_uring_enter: %s", strerror(-w.ret));

	ASSERT_EQ(0, ioctl(early.fd, PERF_EVENT_IOC_DISABLE, 0));
	ASSERT_EQ(0, ioctl(late.fd, PERF_EVENT_IOC_DISABLE, 0));
	ring_drain(&early);
	ring_drain(&late);
	EXPECT_EQ(0, early.nr_malformed) TH_LOG("early: malformed: %s", early.why);
	EXPECT_EQ(0, late.nr_malformed) TH_LOG("late: malformed: %s", late.why);

	/* early: the samples after the walk join it backward. */
	for (k = 0; k < early.nr_rec; k++)
		before += early.rec[k].type == PERF_RECORD_SAMPLE &&
			  early.rec[k].cookie == cookie;
	EXPECT_LE(2, before)
		TH_LOG("early: want samples before and after the walk, cookie %#llx, saw %d",
		       (unsigned long long)cookie, before);

	/* late: never a cookie its buffer has no record of. */
	for (k = 0; k < late.nr_rec; k++) {
		const struct ring_record *s = &late.rec[k];

		if (s->type != PERF_RECORD_SAMPLE || s->tid != (__u32)w.tid)
			continue;
		if (!s->cookie)
			in_place += taken_in_kernel_mode(s) && user_part_at(s, w.site);
		else if (records_of_cookie(&late, s->cookie, &first))
			joined++;
		else if (!missing++)
			missed = s->cookie;
	}
	EXPECT_EQ(0, missing)
		TH_LOG("late: %d samples with a cookie and no record, the first %#llx%s",
		       missing, (unsigned long long)missed,
		       missed == cookie ? ", the stay walked before late was enabled" : "");
	EXPECT_LE(1, in_place)
		TH_LOG("late: want a sample in io_uring_enter(), user stack in place from %#lx",
		       w.site);
	TH_LOG("early: %d samples of the walked stay; late: %d in place, %d joined",
	       before, in_place, joined);

	close_ring(&early);
	close_ring(&late);
	for (i = 0; i < 3; i++) {
		close(w.pipes[i][0]);
		close(w.pipes[i][1]);
	}
	uring_close(&w.u);
}

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
