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

struct file;
struct unwind_user_frame;

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
int sframe_find(unsigned long ip, struct unwind_user_frame *frame,
		unsigned int *reads_left);

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

static inline int sframe_find(unsigned long ip, struct unwind_user_frame *frame,
			      unsigned int *reads_left)
{
	return -ENOENT;
}

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
