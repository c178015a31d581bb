/* SPDX-License-Identifier: GPL-2.0 */
/*
 * How kernel/unwind/user.c walks an x86 user stack: the frame pointer is
 * %rbp (%ebp in compat tasks), and a frame holds the caller's frame
 * pointer followed by the return address, in the task's word size.
 */
#ifndef _ASM_X86_UNWIND_USER_H
#define _ASM_X86_UNWIND_USER_H

#include <linux/stddef.h>
#include <linux/unwind_user_types.h>
#include <asm/ptrace.h>
#include <asm/sigframe.h>

static inline unsigned int unwind_user_word_size(struct pt_regs *regs)
{
	return user_64bit_mode(regs) ? sizeof(u64) : sizeof(u32);
}

static inline unsigned long unwind_user_frame_pointer(struct pt_regs *regs)
{
	return regs->bp;
}

/*
 * A frame-pointer frame: the frame pointer points at the caller's saved
 * frame pointer, the return address is the word above, and the caller's
 * stack pointer (the CFA) the word above that.
 */
static inline void unwind_user_fp_frame(struct unwind_user_frame *frame,
					unsigned int word)
{
	*frame = (struct unwind_user_frame) {
		.cfa_off	= 2 * (s32)word,
		.ra_off		= -(s32)word,
		.fp_off		= -2 * (s32)word,
		.use_fp		= true,
	};
}

/*
 * A 64-bit signal's restorer runs with the stack pointer at the signal
 * frame's ucontext: the handler's return popped the frame's first word,
 * the restorer's address. The interrupted context's instruction, stack
 * and frame pointers are in its uc_mcontext, at these offsets from it.
 */
#define UNWIND_USER_SIGFRAME_REG(reg)					\
	(offsetof(struct rt_sigframe, uc.uc_mcontext.reg) -		\
	 offsetof(struct rt_sigframe, uc))
#define UNWIND_USER_SIGFRAME_IP		UNWIND_USER_SIGFRAME_REG(ip)
#define UNWIND_USER_SIGFRAME_SP		UNWIND_USER_SIGFRAME_REG(sp)
#define UNWIND_USER_SIGFRAME_FP		UNWIND_USER_SIGFRAME_REG(bp)

/*
 * vm86 stacks are segmented; nothing here knows how to walk them (the
 * in-NMI walker of perf skips them as well).
 */
static inline bool unwind_user_regs_ok(struct pt_regs *regs)
{
	return user_mode(regs) && !v8086_mode(regs);
}

#endif /* _ASM_X86_UNWIND_USER_H */
