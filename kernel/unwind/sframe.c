// SPDX-License-Identifier: GPL-2.0
/*
 * SFrame tables of user space, read by the deferred user stack walk.
 *
 * A program built with SFrame (GNU as --gsframe) carries in a
 * PT_GNU_SFRAME segment a table that says, for every address of its code,
 * where the caller's frame is: the canonical frame address (CFA, the stack
 * pointer before the call) as an offset from the stack or frame pointer,
 * and where the return address and the caller's frame pointer were saved.
 * With it the walk steps over functions that keep no frame pointer.
 *
 * A table is found when an ELF file with such a segment is mapped
 * executable (the program and its interpreter at exec, shared objects
 * when ld.so maps them: vm_mmap_pgoff()), or registered by the process
 * with prctl(PR_SFRAME) for code it generates. Each mm keeps its tables in
 * a maple tree indexed by the text they describe; a table goes when any of
 * its text is unmapped or mapped over, and with the mm. fork copies them.
 *
 * Only the header is read when a table is added. The rest is read from
 * the process's memory while walking, in task context: every byte is
 * hostile. Each read is a faulting user access inside the table's bounds,
 * every count and offset is checked before it is used, and anything wrong
 * ends the walk with what was found.
 *
 * The tables change under mmap_lock held for writing only (mapped,
 * unmapped, registered, removed, forked), so that each change sees the
 * tree as the last one left it. A walk looks a table up without any lock
 * (RCU) and takes a reference, which it holds across the faults of its
 * reads; a table goes once unlinked and unreferenced, after a grace
 * period.
 */
#include <linux/compat.h>
#include <linux/elf.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/maple_tree.h>
#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/prctl.h>
#include <linux/rcupdate.h>
#include <linux/refcount.h>
#include <linux/sched.h>
#include <linux/sframe.h>
#include <linux/shmem_fs.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/unwind_user_types.h>
#include <linux/unaligned.h>

#include "sframe.h"
#include "sframe_cache.h"

/*
 * The most FREs looked at for one address: a function's FREs are sorted,
 * so a real table needs as many as the function has CFA changes before
 * that address. The most .eh_frame rows of one function in Debian 12's
 * programs: 44 in libc, 112 in libpython3.11, 366 in perl, 574 in
 * libLLVM-14, 6,678 in gcc's cc1. A table that needs more is treated as
 * damaged. (The walk's budget of reads bounds what all frames cost.)
 */
#define SFRAME_MAX_FRES_SCANNED	8192
/* The most tables one process may register with prctl(). */
#define SFRAME_MAX_REGISTERED	4096
/*
 * The most program headers read from a mapped ELF file: a page of them, as
 * binfmt_elf allows (ELF_MIN_ALIGN), and real files have a dozen.
 */
#define SFRAME_MAX_PHNUM	(SZ_4K / sizeof(struct elf64_phdr))

/**
 * struct sframe_section - one SFrame table of a process
 * @rcu:	frees it after a grace period
 * @ref:	one for the tree, one per walk using it
 * @sframe_start: the table in the process's memory
 * @sframe_end:	its end
 * @text_start:	the code it describes
 * @text_end:	its end
 * @fdes_start:	the function descriptor entries (FDEs), sorted
 * @fres_start:	the frame row entries (FREs; in version 3, each function's
 *		FREs come after a record of the function)
 * @fres_end:	their end
 * @num_fdes:	number of FDEs
 * @version:	SFRAME_VERSION_1, _2 or _3
 * @flags:	the header's SFRAME_F_*
 * @fde_size:	bytes of an FDE (17, 20 or 16)
 * @ra_off:	the return address's offset from the CFA in every frame; 0
 *		when each FRE gives it
 * @fp_off:	the same for the saved frame pointer
 * @registered:	added with prctl(PR_SFRAME), not found in a mapped file
 */
struct sframe_section {
	struct rcu_head	rcu;
	refcount_t	ref;
	unsigned long	sframe_start;
	unsigned long	sframe_end;
	unsigned long	text_start;
	unsigned long	text_end;
	unsigned long	fdes_start;
	unsigned long	fres_start;
	unsigned long	fres_end;
	u32		num_fdes;
	u8		version;
	u8		flags;
	u8		fde_size;
	s8		ra_off;
	s8		fp_off;
	bool		registered;
};

/*
 * Check a table's header and fill @sec from it. @sec's sframe_start and
 * sframe_end say where the table is; nothing past the header is read.
 */
static int sframe_parse_header(const struct sframe_header *hdr,
			       struct sframe_section *sec)
{
	unsigned long size = sec->sframe_end - sec->sframe_start;
	unsigned long body, fdes_end;
	u8 known = SFRAME_F_FDE_SORTED | SFRAME_F_FRAME_POINTER;

	if (hdr->preamble.magic != SFRAME_MAGIC)
		return -EINVAL;
	switch (hdr->preamble.version) {
	case SFRAME_VERSION_1:
		sec->fde_size = sizeof(struct sframe_fde_v1);
		break;
	case SFRAME_VERSION_2:
		sec->fde_size = sizeof(struct sframe_fde_v2);
		known |= SFRAME_F_FDE_FUNC_START_PCREL;
		break;
	case SFRAME_VERSION_3:
		/* Version 3 dropped the frame pointer flag. */
		sec->fde_size = sizeof(struct sframe_fde_v3);
		known = SFRAME_F_FDE_SORTED | SFRAME_F_FDE_FUNC_START_PCREL;
		break;
	default:
		return -EINVAL;
	}
	/* The lookup is a binary search: it needs sorted FDEs. */
	if ((hdr->preamble.flags & ~known) ||
	    !(hdr->preamble.flags & SFRAME_F_FDE_SORTED))
		return -EINVAL;
	if (hdr->abi_arch != SFRAME_ABI_AMD64_ENDIAN_LITTLE || !hdr->num_fdes)
		return -EINVAL;

	/* All of it in u64: no count or offset of 32 bits can wrap it. */
	body = sizeof(*hdr) + hdr->auxhdr_len;
	fdes_end = body + (u64)hdr->fdes_off +
		   (u64)hdr->num_fdes * sec->fde_size;
	if (fdes_end > size ||
	    body + (u64)hdr->fres_off + hdr->fre_len > size)
		return -EINVAL;
	/* The two sub-sections must not overlap: FREs follow the FDEs. */
	if (body + (u64)hdr->fres_off < fdes_end)
		return -EINVAL;

	sec->version = hdr->preamble.version;
	sec->flags = hdr->preamble.flags;
	sec->num_fdes = hdr->num_fdes;
	sec->fdes_start = sec->sframe_start + body + hdr->fdes_off;
	sec->fres_start = sec->sframe_start + body + hdr->fres_off;
	sec->fres_end = sec->fres_start + hdr->fre_len;
	sec->ra_off = hdr->cfa_fixed_ra_offset;
	sec->fp_off = hdr->cfa_fixed_fp_offset;
	return 0;
}

static void sframe_put(struct sframe_section *sec)
{
	if (refcount_dec_and_test(&sec->ref))
		kfree_rcu(sec, rcu);
}

/*
 * Unlink @sec from the tree; mmap_lock held for writing. The store of
 * NULL may need a node: it must not fail, or a table freed by the walks'
 * last reference would stay in the tree.
 */
static void sframe_remove(struct mm_struct *mm, struct sframe_section *sec)
{
	MA_STATE(mas, &mm->sframe_mt, sec->text_start, sec->text_start);

	mmap_assert_write_locked(mm);
	mtree_lock(&mm->sframe_mt);
	if (mas_walk(&mas) == sec) {
		mas_store_gfp(&mas, NULL, GFP_KERNEL_ACCOUNT | __GFP_NOFAIL);
		mm->sframe_registered -= sec->registered;
		sframe_cache_tables_changed(mm);
	}
	mtree_unlock(&mm->sframe_mt);
	sframe_put(sec);
}

/* Drop the tables that describe any of [start, end); mmap_lock for writing. */
static void sframe_remove_range(struct mm_struct *mm, unsigned long start,
				unsigned long end)
{
	struct sframe_section *sec;
	unsigned long index = start;

	if (start >= end)
		return;
	mt_for_each(&mm->sframe_mt, sec, index, end - 1)
		sframe_remove(mm, sec);
}

/* mmap_lock held for writing. */
static int sframe_insert(struct mm_struct *mm, struct sframe_section *sec)
{
	int ret;

	refcount_set(&sec->ref, 1);
	ret = mtree_insert_range(&mm->sframe_mt, sec->text_start,
				 sec->text_end - 1, sec, GFP_KERNEL_ACCOUNT);
	if (!ret) {
		mm->sframe_registered += sec->registered;
		sframe_cache_tables_changed(mm);
	}
	return ret;
}

/* Whether [start, end) is mapped, in one or more VMAs. */
static bool sframe_range_mapped(struct mm_struct *mm, unsigned long start,
				unsigned long end)
{
	struct vm_area_struct *vma;

	while (start < end) {
		vma = vma_lookup(mm, start);
		if (!vma)
			return false;
		start = vma->vm_end;
	}
	return true;
}

/**
 * sframe_mm_init - a new mm has no tables
 * @mm:		the mm, being set up
 */
void sframe_mm_init(struct mm_struct *mm)
{
	/* Walks look tables up without the tree's lock: RCU mode. */
	mt_init_flags(&mm->sframe_mt, MT_FLAGS_USE_RCU);
	mm->sframe_registered = 0;
	/* A forked mm's copy of its parent's cache is not its own. */
	mm->sframe_cache = NULL;
	mm->sframe_gen = 0;
}

/**
 * sframe_dup_mm - a forked mm starts with the tables of its parent's
 * @mm:		the child's mm, not yet visible to anyone, its VMAs copied
 * @oldmm:	the parent's mm
 *
 * Context: dup_mmap(), both mmap_locks held for writing.
 *
 * Tables of code the child does not have (VM_DONTCOPY) stay behind.
 *
 * Return: 0, or -ENOMEM.
 */
int sframe_dup_mm(struct mm_struct *mm, struct mm_struct *oldmm)
{
	struct sframe_section *sec, *copy;
	unsigned long index = 0;
	int ret;

	mt_for_each(&oldmm->sframe_mt, sec, index, ULONG_MAX) {
		if (!sframe_range_mapped(mm, sec->text_start, sec->text_end))
			continue;
		copy = kmemdup(sec, sizeof(*sec), GFP_KERNEL_ACCOUNT);
		if (!copy)
			return -ENOMEM;
		ret = sframe_insert(mm, copy);
		if (ret) {
			kfree(copy);
			return ret;
		}
	}
	return 0;
}

/**
 * sframe_free_mm - free the tables of an mm
 * @mm:		the mm, its last reference gone
 *
 * Nobody can walk with @mm any more: no walk holds a table, which go
 * at once.
 */
void sframe_free_mm(struct mm_struct *mm)
{
	struct sframe_section *sec;
	unsigned long index = 0;

	mt_for_each(&mm->sframe_mt, sec, index, ULONG_MAX)
		kfree(sec);
	mtree_destroy(&mm->sframe_mt);
	sframe_cache_free(mm);
}

/**
 * __sframe_unmapped - [start, end) of @mm is unmapped
 * @mm:		the mm, mmap_lock held for writing
 * @start:	the first byte unmapped
 * @end:	the byte after the last one
 *
 * The tables that describe any of that code go with it.
 */
void __sframe_unmapped(struct mm_struct *mm, unsigned long start,
		       unsigned long end)
{
	sframe_remove_range(mm, start, end);
}

/*
 * Read @len bytes at @pos of @file from its page cache: no access event,
 * no atime update, nothing read from a file that has no page cache.
 * tmpfs and memfd files have no ->read_folio(): shmem finds their folios
 * itself, in swap too.
 */
static int sframe_file_read(struct file *file, void *buf, size_t len,
			    loff_t pos)
{
	struct address_space *mapping = file->f_mapping;
	struct folio *folio;
	size_t offset, n;

	if (pos < 0 || pos + len > i_size_read(mapping->host))
		return -ENOEXEC;
	while (len) {
		if (shmem_mapping(mapping))
			folio = shmem_read_folio(mapping, pos >> PAGE_SHIFT);
		else
			folio = read_mapping_folio(mapping, pos >> PAGE_SHIFT, file);
		if (IS_ERR(folio))
			return PTR_ERR(folio);
		offset = offset_in_folio(folio, pos);
		n = min(len, folio_size(folio) - offset);
		memcpy_from_folio(buf, folio, offset, n);
		folio_put(folio);
		buf += n;
		pos += n;
		len -= n;
	}
	return 0;
}

/*
 * Read the part of a mapped file's ELF headers that locates its SFrame
 * table and the code mapped at @addr: returns 0 and fills @sec, or an
 * error when the file has no usable table.
 */
static int sframe_read_elf(struct file *file, unsigned long addr,
			   unsigned long len, unsigned long pgoff,
			   struct sframe_section *sec)
{
	struct elf64_phdr *phdrs, *text = NULL, *sframe = NULL;
	unsigned long bias, size;
	struct sframe_header hdr;
	struct elf64_hdr ehdr;
	int i, ret;

	ret = sframe_file_read(file, &ehdr, sizeof(ehdr), 0);
	if (ret)
		return ret;
	if (memcmp(ehdr.e_ident, ELFMAG, SELFMAG) ||
	    ehdr.e_ident[EI_CLASS] != ELFCLASS64 ||
	    ehdr.e_ident[EI_DATA] != ELFDATA2LSB ||
	    ehdr.e_machine != EM_X86_64 ||
	    (ehdr.e_type != ET_EXEC && ehdr.e_type != ET_DYN) ||
	    ehdr.e_phentsize != sizeof(*phdrs) ||
	    !ehdr.e_phnum || ehdr.e_phnum > SFRAME_MAX_PHNUM)
		return -ENOEXEC;

	size = ehdr.e_phnum * sizeof(*phdrs);
	phdrs = kmalloc(size, GFP_KERNEL);
	if (!phdrs)
		return -ENOMEM;
	ret = sframe_file_read(file, phdrs, size, ehdr.e_phoff);
	if (ret)
		goto out;
	ret = -ENOEXEC;

	for (i = 0; i < ehdr.e_phnum; i++) {
		struct elf64_phdr *p = &phdrs[i];

		if (p->p_type == PT_GNU_SFRAME) {
			/* Two tables: which one? Neither. */
			if (sframe)
				goto out;
			sframe = p;
		}
		/* The executable segment mapped at @pgoff. */
		if (p->p_type == PT_LOAD && (p->p_flags & PF_X) &&
		    p->p_offset >> PAGE_SHIFT == pgoff && !text)
			text = p;
	}
	if (!sframe || !text)
		goto out;

	/* Where the file's addresses are in this mapping. */
	if ((text->p_offset - text->p_vaddr) & ~PAGE_MASK)
		goto out;
	bias = addr - (text->p_vaddr & PAGE_MASK);
	sec->text_start = bias + text->p_vaddr;
	sec->text_end = sec->text_start + text->p_memsz;
	sec->sframe_start = bias + sframe->p_vaddr;
	sec->sframe_end = sec->sframe_start + sframe->p_memsz;
	if (text->p_memsz > TASK_SIZE || sframe->p_memsz > TASK_SIZE ||
	    sec->text_start < addr || sec->text_end <= sec->text_start ||
	    sec->text_end > addr + PAGE_ALIGN(len) || sec->text_end > TASK_SIZE ||
	    sec->sframe_end <= sec->sframe_start ||
	    sec->sframe_end > TASK_SIZE ||
	    sframe->p_filesz < sizeof(hdr) || sframe->p_filesz > sframe->p_memsz)
		goto out;

	ret = sframe_file_read(file, &hdr, sizeof(hdr), sframe->p_offset);
	if (!ret)
		ret = sframe_parse_header(&hdr, sec);
out:
	kfree(phdrs);
	return ret;
}

/**
 * sframe_file_mapped - a file was mapped executable: find its SFrame table
 * @file:	the file
 * @addr:	where it is mapped
 * @len:	how much
 * @pgoff:	from which page of it
 *
 * Context: task context, the new mapping's mm is current's, mmap_lock not
 * held. Called for every executable file mapping: the program and its
 * interpreter at exec, and shared objects that ld.so maps. The headers are
 * read from the page cache, where ld.so (or exec) just read them.
 *
 * A mapping of the code of an ELF file with a PT_GNU_SFRAME segment gets
 * that table. Whatever tables described the mapped range go: the range
 * is this file's code now.
 */
void sframe_file_mapped(struct file *file, unsigned long addr,
			unsigned long len, unsigned long pgoff)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	struct sframe_section *sec;
	struct file *mapped = NULL;

	/* Compat tasks are walked by frame pointers. */
	if (in_compat_syscall())
		return;

	/*
	 * Read the file the VMA maps: a stacking filesystem, overlayfs,
	 * maps the file it stacks on, whose page cache holds the data.
	 */
	if (mmap_read_lock_killable(mm))
		return;
	vma = vma_lookup(mm, addr);
	if (vma && vma->vm_file && file_user_inode(vma->vm_file) == file_inode(file))
		mapped = get_file(vma->vm_file);
	mmap_read_unlock(mm);
	if (!mapped)
		return;

	/*
	 * Page-cache files only: reads of others may block or have effects
	 * (pipes, relay files).
	 */
	if (!S_ISREG(file_inode(mapped)->i_mode) ||
	    !(mapped->f_mode & FMODE_READ) ||
	    (!mapped->f_mapping->a_ops->read_folio &&
	     !shmem_mapping(mapped->f_mapping)))
		goto put;

	sec = kzalloc(sizeof(*sec), GFP_KERNEL_ACCOUNT);
	if (!sec)
		goto put;
	if (sframe_read_elf(mapped, addr, len, pgoff, sec))
		goto free;

	/*
	 * The file was read without mmap_lock: the mapping may have changed
	 * meanwhile. Add the table only if the file's code is still there,
	 * in a VMA that the new mapping may have merged with.
	 */
	if (mmap_write_lock_killable(mm))
		goto free;
	vma = vma_lookup(mm, addr);
	if (vma && vma->vm_file &&
	    file_user_inode(vma->vm_file) == file_inode(file) &&
	    vma->vm_pgoff + ((addr - vma->vm_start) >> PAGE_SHIFT) == pgoff &&
	    (vma->vm_flags & VM_EXEC) && sec->text_end <= vma->vm_end) {
		sframe_remove_range(mm, addr, sec->text_end);
		if (!sframe_insert(mm, sec))
			sec = NULL;
	}
	mmap_write_unlock(mm);
free:
	kfree(sec);
put:
	fput(mapped);
}

static int sframe_add(const struct prctl_sframe __user *uarg, size_t usize)
{
	struct mm_struct *mm = current->mm;
	struct sframe_header hdr;
	struct sframe_section *sec;
	struct prctl_sframe arg;
	int ret;

	/* What the kernel does not know must be zero: a page of it at most. */
	if (usize > PAGE_SIZE)
		return -E2BIG;
	ret = copy_struct_from_user(&arg, sizeof(arg), uarg, usize);
	if (ret)
		return ret;
	if (!arg.sframe_size || !arg.text_size ||
	    arg.sframe_start > TASK_SIZE || arg.sframe_size > TASK_SIZE ||
	    arg.sframe_start + arg.sframe_size > TASK_SIZE ||
	    arg.text_start > TASK_SIZE || arg.text_size > TASK_SIZE ||
	    arg.text_start + arg.text_size > TASK_SIZE ||
	    arg.sframe_size < sizeof(hdr))
		return -EINVAL;
	if (copy_from_user(&hdr, u64_to_user_ptr(arg.sframe_start), sizeof(hdr)))
		return -EFAULT;

	sec = kzalloc(sizeof(*sec), GFP_KERNEL_ACCOUNT);
	if (!sec)
		return -ENOMEM;
	sec->sframe_start = arg.sframe_start;
	sec->sframe_end = arg.sframe_start + arg.sframe_size;
	sec->text_start = arg.text_start;
	sec->text_end = arg.text_start + arg.text_size;
	sec->registered = true;
	ret = sframe_parse_header(&hdr, sec);
	if (ret)
		goto free;

	if (mmap_write_lock_killable(mm)) {
		ret = -EINTR;
		goto free;
	}
	if (!sframe_range_mapped(mm, sec->text_start, sec->text_end))
		ret = -EINVAL;
	else if (mm->sframe_registered >= SFRAME_MAX_REGISTERED)
		ret = -ENOSPC;
	else
		ret = sframe_insert(mm, sec);
	mmap_write_unlock(mm);
	if (!ret)
		return 0;
free:
	kfree(sec);
	return ret;
}

static int sframe_remove_at(unsigned long text_start)
{
	struct mm_struct *mm = current->mm;
	struct sframe_section *sec;
	int ret = -ENOENT;

	if (mmap_write_lock_killable(mm))
		return -EINTR;
	sec = mtree_load(&mm->sframe_mt, text_start);
	if (sec && sec->text_start == text_start) {
		sframe_remove(mm, sec);
		ret = 0;
	}
	mmap_write_unlock(mm);
	return ret;
}

/**
 * sframe_prctl - prctl(PR_SFRAME, op, ...): add or remove a table
 * @op:		PR_SFRAME_ADD or PR_SFRAME_REMOVE
 * @arg3:	ADD: a struct prctl_sframe; REMOVE: the start of the code of
 *		the table to remove
 * @arg4:	ADD: the size of that structure; REMOVE: 0
 * @arg5:	0
 *
 * Context: task context, the caller's own mm.
 *
 * ADD reads the table's header at once and the rest at every walk
 * through its code, from the process's memory: the table must stay there
 * while it is in use. The rules walks looked up are cached per mm, so a
 * table must not change while it is registered: to change one, REMOVE it
 * and ADD it again. Its code must be mapped, and must not overlap the
 * code of another table.
 *
 * Return: 0; -EINVAL for a bad argument or header, or code that is not
 * mapped; -EFAULT when the structure or the header cannot be read;
 * -E2BIG for a structure longer than the kernel's whose extra bytes are
 * not all zero, or longer than a page; -EEXIST when another table
 * describes some of that code; -ENOSPC past SFRAME_MAX_REGISTERED tables;
 * -ENOENT when REMOVE finds no table whose code starts there; -ENOMEM;
 * -EINTR when a fatal signal came while waiting for mmap_lock;
 * -EOPNOTSUPP in a compat task.
 */
int sframe_prctl(unsigned long op, unsigned long arg3, unsigned long arg4,
		 unsigned long arg5)
{
	if (!current->mm || arg5)
		return -EINVAL;
	/* Compat tasks are walked by their frame pointers only. */
	if (in_compat_syscall())
		return -EOPNOTSUPP;

	switch (op) {
	case PR_SFRAME_ADD:
		return sframe_add((const struct prctl_sframe __user *)arg3, arg4);
	case PR_SFRAME_REMOVE:
		if (arg4)
			return -EINVAL;
		return sframe_remove_at(arg3);
	default:
		return -EINVAL;
	}
}

/*
 * Read @len bytes at @addr of the table, inside [addr, end) of it, charged
 * to the walk's budget of reads.
 */
static int sframe_read(void *buf, unsigned long addr, size_t len,
		       unsigned long end, unsigned int *reads_left)
{
	if (addr > end || len > end - addr)
		return -EINVAL;
	if (!*reads_left)
		return -E2BIG;
	(*reads_left)--;
	if (copy_from_user(buf, (const void __user *)addr, len))
		return -EFAULT;
	return 0;
}

/*
 * The start of the function of the FDE at @fde_addr: @start_off from the
 * field (PCREL: the field is the FDE's first) or from the section.
 */
static unsigned long sframe_func_start(const struct sframe_section *sec,
				       unsigned long fde_addr, s64 start_off)
{
	unsigned long base = sec->sframe_start;

	if (sec->flags & SFRAME_F_FDE_FUNC_START_PCREL)
		base = fde_addr;
	return base + (long)start_off;
}

/* The start field of the FDE at @addr: 32 bits, 64 in version 3. */
static int sframe_read_start(const struct sframe_section *sec,
			     unsigned long addr, unsigned long fdes_end,
			     s64 *start_off, unsigned int *reads_left)
{
	s32 start32;
	int ret;

	if (sec->version == SFRAME_VERSION_3)
		return sframe_read(start_off, addr, sizeof(*start_off), fdes_end,
				   reads_left);
	ret = sframe_read(&start32, addr, sizeof(start32), fdes_end, reads_left);
	*start_off = start32;
	return ret;
}

/* The rest of the function's description, from the FDE at @addr. */
static int sframe_read_func(const struct sframe_section *sec,
			    unsigned long addr, unsigned long fdes_end,
			    struct sframe_func *func, unsigned int *reads_left)
{
	unsigned long fres_len = sec->fres_end - sec->fres_start;
	struct sframe_fde_v3 fde3;
	struct sframe_fda_v3 fda;
	struct sframe_fde_v2 fde;
	int ret;

	if (sec->version != SFRAME_VERSION_3) {
		/* Version 1's FDE is the start of version 2's: the rest stays 0. */
		memset(&fde, 0, sizeof(fde));
		ret = sframe_read(&fde, addr, sec->fde_size, fdes_end, reads_left);
		if (ret)
			return ret;
		if (fde.fres_off >= fres_len)
			return -EINVAL;
		func->size = fde.func_size;
		func->fres = sec->fres_start + fde.fres_off;
		func->fres_num = fde.fres_num;
		func->info = fde.info;
		func->info2 = SFRAME_V3_FDE_TYPE_DEFAULT;
		func->rep_size = sec->version == SFRAME_VERSION_1 ?
				 SFRAME_V1_AMD64_REP_SIZE : fde.rep_size;
		return 0;
	}

	ret = sframe_read(&fde3, addr, sizeof(fde3), fdes_end, reads_left);
	if (ret)
		return ret;
	if (fde3.fres_off >= fres_len)
		return -EINVAL;
	addr = sec->fres_start + fde3.fres_off;
	ret = sframe_read(&fda, addr, sizeof(fda), sec->fres_end, reads_left);
	if (ret)
		return ret;
	func->size = fde3.func_size;
	func->fres = addr + sizeof(fda);
	func->fres_num = fda.fres_num;
	func->info = fda.info;
	func->info2 = fda.info2;
	func->rep_size = fda.rep_size;
	return 0;
}

/*
 * The function that holds @ip: the last FDE that starts at or below it,
 * if @ip is inside its function. -ESRCH when none describes @ip.
 */
static int sframe_find_func(const struct sframe_section *sec, unsigned long ip,
			    struct sframe_func *func, unsigned int *reads_left)
{
	unsigned long fdes_end = sec->fdes_start +
				 (unsigned long)sec->num_fdes * sec->fde_size;
	u32 lo = 0, hi = sec->num_fdes, found = U32_MAX;
	unsigned long addr, start = 0;
	s64 start_off;
	int ret;

	while (lo < hi) {
		u32 mid = lo + (hi - lo) / 2;
		unsigned long mid_start;

		addr = sec->fdes_start + (unsigned long)mid * sec->fde_size;
		ret = sframe_read_start(sec, addr, fdes_end, &start_off,
					reads_left);
		if (ret)
			return ret;
		mid_start = sframe_func_start(sec, addr, start_off);
		if (mid_start <= ip) {
			found = mid;
			start = mid_start;
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	if (found == U32_MAX)
		return -ESRCH;

	addr = sec->fdes_start + (unsigned long)found * sec->fde_size;
	ret = sframe_read_func(sec, addr, fdes_end, func, reads_left);
	if (ret)
		return ret;
	if (ip - start >= func->size)
		return -ESRCH;
	func->start = start;
	return 0;
}

static int sframe_fre_addr_size(u8 fde_info)
{
	switch (SFRAME_FUNC_FRE_TYPE(fde_info)) {
	case SFRAME_FRE_TYPE_ADDR1:
		return 1;
	case SFRAME_FRE_TYPE_ADDR2:
		return 2;
	case SFRAME_FRE_TYPE_ADDR4:
		return 4;
	default:
		return -EINVAL;
	}
}

static int sframe_fre_offset_size(u8 fre_info)
{
	switch (SFRAME_FRE_OFFSET_SIZE(fre_info)) {
	case SFRAME_FRE_OFFSET_1B:
		return 1;
	case SFRAME_FRE_OFFSET_2B:
		return 2;
	case SFRAME_FRE_OFFSET_4B:
		return 4;
	default:
		return -EINVAL;
	}
}

/* Little-endian like the table, unsigned: FRE starts and data words. */
static u32 sframe_get_u(const u8 *p, int size)
{
	switch (size) {
	case 1:
		return *p;
	case 2:
		return get_unaligned_le16(p);
	default:
		return get_unaligned_le32(p);
	}
}

/* A data word of @size bytes read as a signed offset. */
static s32 sframe_sext(u32 word, int size)
{
	switch (size) {
	case 1:
		return (s8)word;
	case 2:
		return (s16)word;
	default:
		return (s32)word;
	}
}

/* The frame of an FRE of a DEFAULT function: every data word an offset. */
static int sframe_default_frame(const struct sframe_section *sec, u8 info,
				const s32 *offsets, struct unwind_user_frame *frame)
{
	unsigned int nr = SFRAME_FRE_OFFSET_COUNT(info), i = 1;

	if (nr > 3)
		return -EINVAL;
	frame->use_fp = SFRAME_FRE_CFA_BASE_REG(info) == SFRAME_BASE_REG_FP;
	frame->cfa_off = offsets[0];

	if (sec->ra_off != SFRAME_CFA_FIXED_OFFSET_INVALID)
		frame->ra_off = sec->ra_off;
	else if (i < nr)
		frame->ra_off = offsets[i++];
	else
		return -EINVAL;

	if (sec->fp_off != SFRAME_CFA_FIXED_OFFSET_INVALID)
		frame->fp_off = sec->fp_off;
	else if (i < nr)
		frame->fp_off = offsets[i++];

	/* Offsets left over, or a return address read from the CFA itself. */
	if (i != nr || !frame->ra_off)
		return -EINVAL;
	return 0;
}

/*
 * The frame of an FRE of a FLEX function (version 3): a control word and
 * an offset for the CFA, then for the return address and the frame
 * pointer, where a control word of 0 alone stands for the default rule.
 * The walk knows the stack and frame pointers of every frame, no other
 * register: a rule based on another one ends the walk.
 */
static int sframe_flex_frame(const struct sframe_section *sec, u8 info,
			     const u32 *words, int size,
			     struct unwind_user_frame *frame)
{
	unsigned int nr = SFRAME_FRE_OFFSET_COUNT(info), i = 2;
	u32 ctl;

	if (nr < 2)
		return -EINVAL;
	ctl = words[0];
	if (!SFRAME_V3_FLEX_REG_P(ctl))
		return -EINVAL;
	switch (SFRAME_V3_FLEX_REGNUM(ctl)) {
	case SFRAME_AMD64_DWARF_RSP:
		break;
	case SFRAME_AMD64_DWARF_RBP:
		frame->use_fp = true;
		break;
	default:
		return -EINVAL;
	}
	frame->cfa_deref = SFRAME_V3_FLEX_DEREF_P(ctl);
	frame->cfa_off = sframe_sext(words[1], size);

	/* The return address: saved at an offset from the CFA, nothing else. */
	frame->ra_off = sec->ra_off;
	if (i < nr) {
		ctl = words[i++];
		if (ctl) {
			if (i == nr || SFRAME_V3_FLEX_REG_P(ctl) ||
			    !SFRAME_V3_FLEX_DEREF_P(ctl))
				return -EINVAL;
			frame->ra_off = sframe_sext(words[i++], size);
		}
	}

	/* The frame pointer: saved from the CFA or from the frame pointer. */
	frame->fp_off = sec->fp_off;
	if (i < nr) {
		ctl = words[i++];
		if (i == nr || !SFRAME_V3_FLEX_DEREF_P(ctl))
			return -EINVAL;
		if (SFRAME_V3_FLEX_REG_P(ctl)) {
			if (SFRAME_V3_FLEX_REGNUM(ctl) != SFRAME_AMD64_DWARF_RBP)
				return -EINVAL;
			frame->fp_from_fp = true;
		}
		frame->fp_off = sframe_sext(words[i++], size);
	}

	if (i != nr || !frame->ra_off)
		return -EINVAL;
	return 0;
}

/*
 * The FRE of @func that covers @ip: the last one that starts at or below
 * it. FREs are variable-sized, so they are read one by one from the
 * function's first, each inside the FRE sub-section.
 */
static int sframe_find_fre(const struct sframe_section *sec,
			   const struct sframe_func *func, unsigned long ip,
			   struct unwind_user_frame *frame, unsigned int *reads_left)
{
	s32 offsets[SFRAME_FRE_MAX_OFFSETS];
	u32 words[SFRAME_FRE_MAX_OFFSETS];
	int addr_size, off_size = 0, nr, j, ret;
	u8 buf[SFRAME_FRE_MAX_SIZE];
	unsigned long pc = ip - func->start, addr, len;
	u32 i, start, prev = 0;
	bool found = false;
	u8 info = 0;

	addr_size = sframe_fre_addr_size(func->info);
	if (addr_size < 0)
		return addr_size;
	if (SFRAME_FUNC_FDE_TYPE(func->info) == SFRAME_FDE_TYPE_PCMASK) {
		if (!func->rep_size)
			return -EINVAL;
		pc %= func->rep_size;
	}

	addr = func->fres;
	for (i = 0; i < func->fres_num; i++) {
		if (i == SFRAME_MAX_FRES_SCANNED)
			return -EINVAL;
		if (addr >= sec->fres_end)
			return -EINVAL;
		len = min_t(unsigned long, sizeof(buf), sec->fres_end - addr);
		/* An FRE has a start and an info byte at least. */
		if (len < addr_size + 1)
			return -EINVAL;
		ret = sframe_read(buf, addr, len, sec->fres_end, reads_left);
		if (ret)
			return ret;
		start = sframe_get_u(buf, addr_size);
		if (i && start <= prev)
			return -EINVAL;
		if (start > pc)
			break;

		info = buf[addr_size];
		off_size = sframe_fre_offset_size(info);
		nr = SFRAME_FRE_OFFSET_COUNT(info);
		if (off_size < 0 || nr > SFRAME_FRE_MAX_OFFSETS ||
		    SFRAME_FRE_MANGLED_RA(info) ||
		    addr_size + 1 + nr * off_size > len)
			return -EINVAL;
		for (j = 0; j < nr; j++) {
			words[j] = sframe_get_u(buf + addr_size + 1 + j * off_size,
						off_size);
			offsets[j] = sframe_sext(words[j], off_size);
		}
		found = true;
		prev = start;
		addr += addr_size + 1 + nr * off_size;
	}
	if (!found)
		return -ESRCH;

	memset(frame, 0, sizeof(*frame));
	/* A row without data words: the return address is undefined, the end. */
	if (!SFRAME_FRE_OFFSET_COUNT(info)) {
		frame->outermost = true;
		return 0;
	}
	switch (SFRAME_V3_FDE_TYPE(func->info2)) {
	case SFRAME_V3_FDE_TYPE_DEFAULT:
		return sframe_default_frame(sec, info, offsets, frame);
	case SFRAME_V3_FDE_TYPE_FLEX:
		return sframe_flex_frame(sec, info, words, off_size, frame);
	default:
		return -EINVAL;
	}
}

/**
 * __sframe_covers_ip - whether a table of @mm describes the code at @ip
 * @mm:		the current task's mm
 * @ip:		a user address
 *
 * Context: any, NMI included: a lockless lookup of the tree (RCU).
 *
 * Return: true when a table's text holds @ip (whether a function of the
 * table does is for the walk to find out).
 */
bool __sframe_covers_ip(struct mm_struct *mm, unsigned long ip)
{
	return mtree_load(&mm->sframe_mt, ip);
}

/*
 * The table that describes @ip, referenced in @walk: the last frame's if
 * its code holds @ip, else a new lookup. NULL when none does.
 */
static struct sframe_section *sframe_walk_table(struct sframe_walk *walk,
						struct mm_struct *mm,
						unsigned long ip)
{
	struct sframe_section *sec = walk->sec;

	if (sec && ip >= sec->text_start && ip < sec->text_end)
		return sec;
	/* Another table: the last one's function goes with it. */
	if (sec)
		sframe_put(sec);
	walk->sec = NULL;
	walk->have_func = false;

	/* A reference, not a read-side section: the reads may fault and wait. */
	rcu_read_lock();
	sec = mtree_load(&mm->sframe_mt, ip);
	if (sec && !refcount_inc_not_zero(&sec->ref))
		sec = NULL;
	rcu_read_unlock();
	walk->sec = sec;
	return sec;
}

/* How to step from @ip by the table @sec; see sframe_find(). */
static int sframe_find_rule(struct sframe_walk *walk, struct sframe_section *sec,
			    unsigned long ip, struct unwind_user_frame *frame,
			    unsigned int *reads_left)
{
	struct sframe_func *func = &walk->func;
	int ret;

	/* The last frame's function again (recursion): no search. */
	if (!walk->have_func || ip < func->start || ip - func->start >= func->size) {
		walk->have_func = false;
		ret = sframe_find_func(sec, ip, func, reads_left);
		if (ret)
			return ret;
		walk->have_func = true;
	}
	if (sec->version == SFRAME_VERSION_3) {
		/* A signal's restorer: no FRE says more than the mark. */
		if (SFRAME_V3_FDE_SIGNAL(func->info)) {
			memset(frame, 0, sizeof(*frame));
			frame->signal = true;
			return 0;
		}
		/* A DEFAULT function without FREs marks the outermost frame. */
		if (!func->fres_num &&
		    SFRAME_V3_FDE_TYPE(func->info2) == SFRAME_V3_FDE_TYPE_DEFAULT) {
			memset(frame, 0, sizeof(*frame));
			frame->outermost = true;
			return 0;
		}
	}
	return sframe_find_fre(sec, func, ip, frame, reads_left);
}

/**
 * sframe_find - how to step from the frame at @ip to its caller's
 * @walk:	what the walk kept from its earlier frames; zeroed at the
 *		walk's start, given to sframe_walk_end() at its end
 * @ip:		a user address of the current task: where it stopped, or a
 *		return address minus one (the call, which may end a function)
 * @frame:	filled with the frame's CFA rule and saved registers
 * @reads_left:	the walk's budget of user reads, charged for each
 *
 * Context: task context, may fault and sleep.
 *
 * What the walks of the process found is kept in its mm's cache
 * (sframe_cache.c) until its tables change: an address met before is
 * looked up there, with no read of a table. Within one walk the table,
 * the function and the rule of the last frame are kept in @walk as well:
 * a frame of the same function is looked up without a search, a frame at
 * the same address (a recursion's return addresses) without even the
 * cache. A table is read as it was at the first lookup of each thing
 * kept, which a task rewriting its table cannot turn into more than a
 * wrong stack: every frame must still lie above the last.
 *
 * Return: 0 with @frame filled; -ENOENT when no table describes @ip, or
 * its table does not and says that its code keeps frame pointers: the
 * caller walks that frame by its frame pointer; any other error when the
 * table cannot say (damaged, or not readable): the walk ends.
 */
int sframe_find(struct sframe_walk *walk, unsigned long ip,
		struct unwind_user_frame *frame, unsigned int *reads_left)
{
	struct mm_struct *mm = current->mm;
	struct sframe_section *sec;
	int ret;

	if (!mm)
		return -ENOENT;
	if (walk->have_rule && walk->addr == ip) {
		*frame = walk->rule;
		return walk->ret;
	}

	/*
	 * One generation for the whole walk, read before its first table:
	 * a table kept in @walk may have gone from the tree since, and what
	 * it says must not be cached as the tree's newer state.
	 */
	if (!walk->have_gen) {
		walk->gen = sframe_cache_gen(mm);
		walk->have_gen = true;
	}
	if (sframe_cache_lookup(mm, ip, walk->gen, frame, &ret))
		goto keep;

	sec = sframe_walk_table(walk, mm, ip);
	if (sec) {
		ret = sframe_find_rule(walk, sec, ip, frame, reads_left);
		/* Code the table leaves out is walked by frame pointers only if it keeps them. */
		if (ret == -ESRCH)
			ret = sec->flags & SFRAME_F_FRAME_POINTER ? -ENOENT : -ESRCH;
	} else {
		ret = -ENOENT;
	}
	sframe_cache_store(mm, ip, walk->gen, frame, ret);

keep:
	/* Out of budget is not what the table says: not kept. */
	walk->have_rule = ret != -E2BIG;
	walk->addr = ip;
	walk->ret = ret;
	if (!ret)
		walk->rule = *frame;
	return ret;
}

/**
 * sframe_walk_end - a walk is done with what it kept
 * @walk:	as sframe_find() left it
 *
 * Drops the reference on the last table, and forgets the rest.
 */
void sframe_walk_end(struct sframe_walk *walk)
{
	if (walk->sec)
		sframe_put(walk->sec);
	memset(walk, 0, sizeof(*walk));
}
