/* SPDX-License-Identifier: GPL-2.0 */
/*
 * SFrame tables of user space (kernel/unwind/sframe.c): found when an ELF
 * file with a PT_GNU_SFRAME segment is mapped executable, or registered
 * with prctl(PR_SFRAME); kept per mm; read by the deferred user stack walk
 * to step over frames that keep no frame pointer.
 */
#ifndef _LINUX_SFRAME_H
#define _LINUX_SFRAME_H

#include <linux/errno.h>
#include <linux/mm_types.h>
#include <linux/sched.h>
#include <linux/unwind_user_types.h>

struct file;
struct sframe_section;

/**
 * struct sframe_func - a function's description, whatever the version
 * @start:	the function's address
 * @size:	its bytes
 * @fres:	its first FRE, in the process's memory
 * @fres_num:	its FREs
 * @info:	the FDE's info byte: FRE start size, PC type (v3: signal)
 * @info2:	v3's second info byte, the data words' type; 0 (DEFAULT) before
 * @rep_size:	the block size of a PCMASK function
 */
struct sframe_func {
	unsigned long	start;
	u32		size;
	unsigned long	fres;
	u32		fres_num;
	u8		info;
	u8		info2;
	u8		rep_size;
};

/**
 * struct sframe_walk - what one walk keeps from one frame to the next
 * @sec:	the table of the last frame looked up, referenced; NULL: none
 * @func:	the function of that frame in @sec, when @have_func
 * @have_func:	@func is valid
 * @addr:	the address of the last lookup, when @have_rule
 * @have_rule:	@rule and @ret are what that lookup found
 * @ret:	what sframe_find() returned for @addr
 * @rule:	the frame rule it found
 * @have_gen:	@gen is read
 * @gen:	the generation of the mm's tables the walk caches rules of
 *
 * A recursion, or a deep chain through few functions, looks the same
 * table, function and often the same address up again: the walk finds
 * them here, with no read of the table. Only the walking task uses it,
 * within one walk, which holds a reference on @sec; sframe_walk_end()
 * drops it. Zeroed: nothing kept.
 */
struct sframe_walk {
	struct sframe_section	*sec;
	struct sframe_func	func;
	bool			have_func;
	bool			have_rule;
	int			ret;
	unsigned long		addr;
	struct unwind_user_frame rule;
	bool			have_gen;
	u32			gen;
};

#ifdef CONFIG_UNWIND_USER_SFRAME

void sframe_mm_init(struct mm_struct *mm);
int sframe_dup_mm(struct mm_struct *mm, struct mm_struct *oldmm);
void sframe_free_mm(struct mm_struct *mm);
void sframe_file_mapped(struct file *file, unsigned long addr,
			unsigned long len, unsigned long pgoff);
void __sframe_unmapped(struct mm_struct *mm, unsigned long start,
		       unsigned long end);
int sframe_prctl(unsigned long op, unsigned long arg3, unsigned long arg4,
		 unsigned long arg5);
int sframe_find(struct sframe_walk *walk, unsigned long ip,
		struct unwind_user_frame *frame, unsigned int *reads_left);
void sframe_walk_end(struct sframe_walk *walk);

static inline bool mm_has_sframe(struct mm_struct *mm)
{
	/* Racy, also from NMI: a table added or removed meanwhile is either. */
	return mm && !data_race(mtree_empty(&mm->sframe_mt));
}

/*
 * Whether the current task has SFrame tables: then only the deferred
 * walk, which reads them, gets its user stacks right. NMI-safe.
 */
static inline bool current_has_sframe(void)
{
	return mm_has_sframe(current->mm);
}

bool __sframe_covers_ip(struct mm_struct *mm, unsigned long ip);

/*
 * Whether an SFrame table of the current task describes the code at user
 * address @ip: a walk from there needs the tables. NMI-safe.
 */
static inline bool sframe_covers_ip(unsigned long ip)
{
	struct mm_struct *mm = current->mm;

	return mm_has_sframe(mm) && __sframe_covers_ip(mm, ip);
}

/* [start, end) is being unmapped: the tables of that code go with it. */
static inline void sframe_unmapped(struct mm_struct *mm, unsigned long start,
				   unsigned long end)
{
	if (mm_has_sframe(mm))
		__sframe_unmapped(mm, start, end);
}

#else /* !CONFIG_UNWIND_USER_SFRAME */

static inline void sframe_mm_init(struct mm_struct *mm) {}

static inline int sframe_dup_mm(struct mm_struct *mm, struct mm_struct *oldmm)
{
	return 0;
}

static inline void sframe_free_mm(struct mm_struct *mm) {}
static inline void sframe_file_mapped(struct file *file, unsigned long addr,
				      unsigned long len, unsigned long pgoff) {}
static inline void sframe_unmapped(struct mm_struct *mm, unsigned long start,
				   unsigned long end) {}

static inline int sframe_prctl(unsigned long op, unsigned long arg3,
			       unsigned long arg4, unsigned long arg5)
{
	return -EINVAL;
}

static inline int sframe_find(struct sframe_walk *walk, unsigned long ip,
			      struct unwind_user_frame *frame,
			      unsigned int *reads_left)
{
	return -ENOENT;
}

static inline void sframe_walk_end(struct sframe_walk *walk) {}

static inline bool current_has_sframe(void)
{
	return false;
}

static inline bool sframe_covers_ip(unsigned long ip)
{
	return false;
}

#endif /* CONFIG_UNWIND_USER_SFRAME */

#endif /* _LINUX_SFRAME_H */
