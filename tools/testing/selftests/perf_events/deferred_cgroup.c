// SPDX-License-Identifier: GPL-2.0
/*
 * PERF_SAMPLE_CALLCHAIN_DEFERRED from the observer's side: a cgroup event
 * gets the user stacks of its cgroup's tasks only.
 *
 * Build with frame pointers and no sibling calls (see Makefile).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_spin.h"
#include "deferred_observe.h"

#define CGROUP_NAME		"deferred_cgroup"

static int perf_open_flags(struct perf_event_attr *attr, pid_t pid, int cpu,
			   unsigned long flags)
{
	return syscall(__NR_perf_event_open, attr, pid, cpu, -1, flags);
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
	drain_until_sampled(r, 2);
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

TEST_HARNESS_MAIN
