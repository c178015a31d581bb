// SPDX-License-Identifier: GPL-2.0
/*
 * Walk the current task's user stack, in task context where page faults
 * are allowed: the deferred walk of unwind_deferred.c.
 *
 * Each frame is stepped over by the SFrame table of its code when the
 * task has one (kernel/unwind/sframe.c), by its frame pointer otherwise.
 * Unlike the walk perf does inside the NMI, every read here may fault the
 * page in, so a stack page that is not resident does not end the walk. In
 * exchange the walk trusts nothing it reads: each frame must lie strictly
 * above the previous one and be word aligned, and any failure ends the
 * walk with what was collected. Nor does it let the task decide how long
 * it takes: a walk has a budget of user reads (UNWIND_USER_MAX_READS),
 * stack and table reads alike, and yields the CPU between frames; when the
 * budget runs out, the walk ends with what it found.
 */
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/task_stack.h>
#include <linux/sframe.h>
#include <linux/uaccess.h>
#include <linux/unwind_user.h>
#include <linux/uprobes.h>
#include <asm/unwind_user.h>

/*
 * Read one word of the user stack, charged to the walk's budget; compat
 * tasks have 4-byte words.
 */
static int unwind_user_read(unsigned long addr, unsigned int word,
			    unsigned long *val, unsigned int *reads_left)
{
	u32 val32;

	if (!*reads_left)
		return -E2BIG;
	(*reads_left)--;
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
 * struct unwind_user_state - where the walk is
 * @ip:		the frame's address: where the task stopped, then return
 *		addresses
 * @sp:		the frame's stack pointer
 * @fp:		the frame pointer register, as the frame left it
 * @word:	the task's word size
 * @reads_left:	the user reads the walk may still make
 * @topmost:	the frame is the one the task stopped in, or one a signal
 *		interrupted: its @ip is exact, not a return address
 * @sframe:	the task has SFrame tables (64-bit tasks only)
 * @done:	nothing more to walk
 * @tables:	what the walk by tables keeps from frame to frame
 */
struct unwind_user_state {
	unsigned long	ip;
	unsigned long	sp;
	unsigned long	fp;
	unsigned int	word;
	unsigned int	reads_left;
	bool		topmost;
	bool		sframe;
	bool		done;
	struct sframe_walk tables;
};

/*
 * Step from a signal's restorer to the context the signal interrupted, as
 * the signal frame at the stack pointer saved it. Its instruction pointer
 * is where the task was, not a return address: it is looked up as is, like
 * the topmost frame's.
 */
static void unwind_user_signal(struct unwind_user_state *state)
{
	unsigned long ip, sp, fp;

	if (unwind_user_read(state->sp + UNWIND_USER_SIGFRAME_IP, state->word,
			     &ip, &state->reads_left) ||
	    unwind_user_read(state->sp + UNWIND_USER_SIGFRAME_SP, state->word,
			     &sp, &state->reads_left) ||
	    unwind_user_read(state->sp + UNWIND_USER_SIGFRAME_FP, state->word,
			     &fp, &state->reads_left))
		goto done;
	/* The signal frame lies below the context it saved. */
	if (!ip || sp <= state->sp || sp & (state->word - 1))
		goto done;
	state->ip = ip;
	state->sp = sp;
	state->fp = fp;
	state->topmost = true;
	return;
done:
	state->done = true;
}

/* Step from the frame of @state to its caller's, by the rule @frame. */
static void unwind_user_next_common(struct unwind_user_state *state,
				    const struct unwind_user_frame *frame)
{
	unsigned long cfa, ra, fp = state->fp;

	if (frame->outermost)
		goto done;
	if (frame->signal) {
		unwind_user_signal(state);
		return;
	}
	if (frame->use_fp) {
		if (state->fp < state->sp)
			goto done;
		cfa = state->fp;
	} else {
		cfa = state->sp;
	}
	cfa += frame->cfa_off;
	if (frame->cfa_deref &&
	    unwind_user_read(cfa, state->word, &cfa, &state->reads_left))
		goto done;

	/* Strictly above the frame (no wrap either), word aligned. */
	if (cfa <= state->sp || cfa & (state->word - 1))
		goto done;
	if ((frame->fp_off || frame->fp_from_fp) &&
	    unwind_user_read((frame->fp_from_fp ? state->fp : cfa) + frame->fp_off,
			     state->word, &fp, &state->reads_left))
		goto done;
	if (unwind_user_read(cfa + frame->ra_off, state->word, &ra,
			     &state->reads_left) || !ra)
		goto done;

	state->ip = ra;
	state->sp = cfa;
	state->fp = fp;
	state->topmost = false;
	return;
done:
	state->done = true;
}

static void unwind_user_next(struct unwind_user_state *state)
{
	struct unwind_user_frame frame;
	int ret = -ENOENT;

	/*
	 * A return address is the instruction after a call, which may be
	 * past the end of the calling function: look up the call.
	 */
	if (state->sframe)
		ret = sframe_find(&state->tables,
				  state->topmost ? state->ip : state->ip - 1,
				  &frame, &state->reads_left);
	if (ret == -ENOENT)
		unwind_user_fp_frame(&frame, state->word);
	else if (ret)
		frame.outermost = true;
	unwind_user_next_common(state, &frame);
}

/**
 * unwind_user_faultable - walk the current task's user stack
 * @trace:	its @entries is where to store the user addresses, innermost
 *		first; its @nr is set to how many were stored
 * @max_entries: the most entries to store
 *
 * Context: task context of a user task, in the kernel; may fault and sleep.
 *
 * entries[0] is the user IP at kernel entry (the probed address when the
 * task is about to single-step a uprobe's copy), then come the return
 * addresses of the frames above it. A frame whose code an SFrame table of
 * the task describes is stepped over by that table; any other by its
 * frame pointer, a frame being two words, the caller's frame pointer and
 * the return address (asm/unwind_user.h). Compat tasks are walked by
 * their frame pointers only. The walk makes at most UNWIND_USER_MAX_READS
 * reads of user memory, and ends with what it found when they run out.
 *
 * Return: the number of reads of user memory the walk made, or -EINVAL
 * when there is no user stack to walk (no entry).
 */
int unwind_user_faultable(struct unwind_stacktrace *trace,
			  unsigned int max_entries)
{
	struct pt_regs *regs = task_pt_regs(current);
	unsigned long *entries = trace->entries;
	struct unwind_user_state state;
	struct unwind_uretprobe ur;
	unsigned int nr = 0;

	might_fault();
	trace->nr = 0;
	if (!max_entries || !current->mm || !unwind_user_regs_ok(regs))
		return -EINVAL;

	state = (struct unwind_user_state) {
		.sp		= user_stack_pointer(regs),
		.fp		= unwind_user_frame_pointer(regs),
		.word		= unwind_user_word_size(regs),
		.reads_left	= UNWIND_USER_MAX_READS,
		.topmost	= true,
	};
	state.sframe = state.word == sizeof(long) && current_has_sframe();
	unwind_uretprobe_init(&ur);

	/*
	 * Interrupted just after returning into a uretprobe trampoline? The
	 * real address is also the one whose table says where its caller is.
	 */
	state.ip = unwind_uretprobe_fixup(&ur, unwind_user_ip(regs));
	entries[nr++] = state.ip;
	while (nr < max_entries) {
		/* The task may make each frame cost reads: give others the CPU. */
		cond_resched();
		unwind_user_next(&state);
		if (state.done)
			break;
		state.ip = unwind_uretprobe_fixup(&ur, state.ip);
		entries[nr++] = state.ip;
	}
	sframe_walk_end(&state.tables);
	trace->nr = nr;
	return UNWIND_USER_MAX_READS - state.reads_left;
}
