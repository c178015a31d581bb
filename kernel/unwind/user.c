// SPDX-License-Identifier: GPL-2.0
/*
 * Walk the current task's user stack by its frame pointers, in task context
 * where page faults are allowed: the deferred walk of unwind_deferred.c.
 *
 * Unlike the walk perf does inside the NMI, every read here may fault the
 * page in, so a stack page that is not resident does not end the walk. In
 * exchange the walk trusts nothing it reads: each frame must lie strictly
 * above the previous one and be word aligned, and any failure ends the
 * walk with what was collected.
 */
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/uaccess.h>
#include <linux/unwind_user.h>
#include <linux/uprobes.h>
#include <asm/unwind_user.h>

/* Read one word of the user stack; compat tasks have 4-byte words. */
static int unwind_user_read(unsigned long addr, unsigned int word,
			    unsigned long *val)
{
	u32 val32;

	if (word == sizeof(unsigned long))
		return get_user(*val, (unsigned long __user *)addr);

	if (get_user(val32, (u32 __user *)addr))
		return -EFAULT;
	*val = val32;
	return 0;
}

#ifdef CONFIG_UPROBES
/*
 * A pending uretprobe replaced a return address on the stack with its
 * trampoline. The task's return instances, innermost first, hold the real
 * addresses in the order the walk meets the trampolines.
 */
struct unwind_uretprobe {
	struct return_instance	*ri;
	unsigned long		trampoline;
};

static void unwind_uretprobe_init(struct unwind_uretprobe *ur)
{
	struct uprobe_task *utask = current->utask;

	ur->ri = utask ? utask->return_instances : NULL;
	ur->trampoline = ur->ri ? uprobe_get_trampoline_vaddr() : 0;
}

static unsigned long unwind_uretprobe_fixup(struct unwind_uretprobe *ur,
					    unsigned long addr)
{
	if (!ur->ri || addr != ur->trampoline)
		return addr;
	addr = ur->ri->orig_ret_vaddr;
	ur->ri = ur->ri->next;
	return addr;
}

/*
 * After a uprobe's handlers the task returns to user space at the
 * out-of-line copy of the probed instruction, in the XOL area; the other
 * registers are still those at the probe, where the walk starts.
 */
static unsigned long unwind_user_ip(struct pt_regs *regs)
{
	struct uprobe_task *utask = current->utask;
	unsigned long ip = instruction_pointer(regs);

	if (utask && utask->active_uprobe && ip == utask->xol_vaddr)
		return utask->vaddr;
	return ip;
}
#else
struct unwind_uretprobe {};

static void unwind_uretprobe_init(struct unwind_uretprobe *ur) {}

static unsigned long unwind_uretprobe_fixup(struct unwind_uretprobe *ur,
					    unsigned long addr)
{
	return addr;
}

static unsigned long unwind_user_ip(struct pt_regs *regs)
{
	return instruction_pointer(regs);
}
#endif

/**
 * unwind_user - walk the current task's user stack by frame pointers
 * @trace:	its @entries is where to store the user addresses, innermost
 *		first; its @nr is set to how many were stored
 * @max_entries: the most entries to store
 *
 * Context: task context of a user task, in the kernel; may fault and sleep.
 *
 * entries[0] is the user IP at kernel entry (the probed address when the
 * task is about to single-step a uprobe's copy), then come the return addresses
 * found by following the frame-pointer chain from the user registers saved
 * at kernel entry. A frame is two words, the caller's frame pointer and
 * the return address (asm/unwind_user.h).
 *
 * Return: 0, or -EINVAL when there is no user stack to walk (no entry).
 */
int unwind_user(struct unwind_stacktrace *trace, unsigned int max_entries)
{
	struct pt_regs *regs = task_pt_regs(current);
	unsigned long fp, sp, next_fp, ret_addr;
	unsigned long *entries = trace->entries;
	unsigned int word, max = max_entries, nr = 0;
	struct unwind_uretprobe ur;

	might_fault();
	trace->nr = 0;
	if (!max || !current->mm || !unwind_user_regs_ok(regs))
		return -EINVAL;

	word = unwind_user_word_size(regs);
	fp = unwind_user_frame_pointer(regs);
	sp = user_stack_pointer(regs);
	unwind_uretprobe_init(&ur);

	/* Interrupted just after returning into a uretprobe trampoline? */
	entries[nr++] = unwind_uretprobe_fixup(&ur, unwind_user_ip(regs));
	while (nr < max) {
		/* Above everything walked so far, word aligned, no wrap. */
		if (fp < sp || fp & (word - 1) || fp + 2 * word < fp)
			break;
		if (unwind_user_read(fp, word, &next_fp) ||
		    unwind_user_read(fp + word, word, &ret_addr) || !ret_addr)
			break;
		entries[nr++] = unwind_uretprobe_fixup(&ur, ret_addr);
		sp = fp + 2 * word;
		fp = next_fp;
	}
	trace->nr = nr;
	return 0;
}
