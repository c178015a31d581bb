// SPDX-License-Identifier: GPL-2.0
/*
 * Exact stacks around a uprobe on a call instruction: the kernel emulates
 * the call (pushes the return address and jumps) inside the breakpoint's
 * stay, and the samples taken before the emulation are walked before it.
 *
 * Built 64-bit, and 32-bit as deferred_exact_uprobe_32, a compat task (see
 * deferred_exact.h).
 */
#define _GNU_SOURCE

#include "../kselftest_harness.h"
#include "deferred_ring.h"
#include "deferred_util.h"
#include "deferred_exact.h"
#include "deferred_exact_call.h"

/* The probed call (deferred_exact_call.h) and its caller. */
static __attribute__((noipa)) void emulated_call(void)
{
	asm volatile(".globl exact_call_site\n"
		     ".hidden exact_call_site\n"
		     "exact_call_site:\n\t"
		     "call exact_call_target"
		     : : : "memory");
}

/* The offset in this program's file of an address of its code. */
static long file_offset(unsigned long addr)
{
	unsigned long start, end, off;
	char line[512], perm[8];
	long ret = -1;
	FILE *f;

	f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while (ret < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s %lx", &start, &end, perm, &off) == 4 &&
		    addr >= start && addr < end)
			ret = addr - start + off;
	fclose(f);
	return ret;
}

/* Write one line to a tracefs file: 0, or -errno. */
static int tracefs_write(const char *root, const char *file, const char *line)
{
	char path[128];
	int fd, ret = 0;

	snprintf(path, sizeof(path), "%s/%s", root, file);
	fd = open(path, O_WRONLY | O_APPEND);
	if (fd < 0)
		return -errno;
	if (write(fd, line, strlen(line)) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

/* A counting uprobe event on this program's address addr: installs the probe. */
static int open_uprobe(unsigned long addr)
{
	struct perf_event_attr attr = {
		.size		= sizeof(attr),
		.disabled	= 1,
	};
	long offset = file_offset(addr);
	char buf[32] = "";
	FILE *f;

	f = fopen("/sys/bus/event_source/devices/uprobe/type", "r");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	if (!buf[0] || offset < 0)
		return -1;
	attr.type = atoi(buf);
	attr.config1 = (__u64)(unsigned long)"/proc/self/exe";
	attr.config2 = offset;
	return perf_open(&attr, 0, -1);
}

#define UPROBE_RESUME	"deferred_exact/uprobe_resume"

/*
 * A uprobe on a call instruction: the kernel emulates the call inside the
 * stay of the breakpoint's trap, after the probe's handlers. A sample
 * taken in that stay before (here of a kprobe on uprobe_notify_resume(),
 * which runs the handlers and the emulation) is joined with the stack at
 * the trap, not in the call's target: the walk runs as the handling
 * begins, before the handlers' RCU read section and the emulation, with
 * the registers of the trap (the breakpoint's address plus one), the same
 * stack its twin walked at the trap found.
 */
TEST(uprobe_call_emulation_walks_before_the_call)
{
	static const char * const tps[] = { UPROBE_RESUME };
	unsigned long site = (unsigned long)exact_call_site;
	const char *root = tracefs_root();
	int i, uprobe, at_call = 0, in_target = 0;
	struct agreement ag;
	struct twins tw;
	size_t k;

	if (!root)
		SKIP(return, "no tracefs");
	if (tracefs_write(root, "kprobe_events",
			  "p:" UPROBE_RESUME " uprobe_notify_resume\n"))
		SKIP(return, "no kprobe on uprobe_notify_resume (CONFIG_KPROBE_EVENTS): %s",
		     strerror(errno));
	uprobe = open_uprobe(site);
	if (uprobe < 0) {
		tracefs_write(root, "kprobe_events", "-:" UPROBE_RESUME "\n");
		SKIP(return, "no uprobe PMU (CONFIG_UPROBE_EVENTS): %s", strerror(errno));
	}
	if (open_twins(_metadata, &tw, tps, 1, 0, -1, false, false)) {
		close(uprobe);
		tracefs_write(root, "kprobe_events", "-:" UPROBE_RESUME "\n");
		SKIP(return, "%s", tw.why);
	}

	ASSERT_EQ(0, sampling(true));
	for (i = 0; i < ROUNDS; i++)
		emulated_call();
	ASSERT_EQ(0, sampling(false));
	drain_twins(&tw);

	compare_twins(_metadata, &tw, gettid_(), 0, MIN_DEPTH, &ag);
	expect_agreement(_metadata, &ag, MIN_HITS);
	for (k = 0; k < ag.nr_pair; k++) {
		const struct pair *p = &ag.pair[k];

		if (!p->def->cookie || !p->got_nr)
			continue;
		at_call += p->got[0] == site + 1;
		in_target += p->got[0] == (unsigned long)exact_call_target;
		EXPECT_EQ((__u64)site + 1, frame(p->want, p->want_nr, 0))
			TH_LOG("walked at the trap: expected the breakpoint's address + 1");
	}
	EXPECT_EQ(ag.joined, at_call)
		TH_LOG("want stacks that start at the trap %#lx: %d of %d joined, %d in its target",
		       site + 1, at_call, ag.joined, in_target);

	free(ag.pair);
	close_twins(&tw);
	close(uprobe);
	EXPECT_EQ(0, tracefs_write(root, "kprobe_events", "-:" UPROBE_RESUME "\n"));
}

TEST_HARNESS_MAIN
