// SPDX-License-Identifier: GPL-2.0
/*
 * A shared object built like the SFrame tests (SFrame, no frame
 * pointers), that sframe_found_test dlopen()s: its two frames sit between
 * the test and the callback that asks for a walk.
 */
#define NOIPA __attribute__((noipa))

typedef long (*sframe_cb)(void *arg);

/* ret[0]: sframe_lib_inner()'s return address, ret[1]: sframe_lib_call()'s. */
static NOIPA long sframe_lib_inner(sframe_cb cb, void *arg, unsigned long *ret)
{
	unsigned long frame[3];		/* a frame of its own */
	long r;

	asm volatile("" : : "r" (frame) : "memory");
	ret[0] = (unsigned long)__builtin_return_address(0);
	r = cb(arg);
	asm volatile("" : : "r" (frame) : "memory");	/* not a tail call */
	return r;
}

NOIPA long sframe_lib_call(sframe_cb cb, void *arg, unsigned long *ret)
{
	unsigned long frame[7];
	long r;

	asm volatile("" : : "r" (frame) : "memory");
	ret[1] = (unsigned long)__builtin_return_address(0);
	r = sframe_lib_inner(cb, arg, ret);
	asm volatile("" : : "r" (frame) : "memory");
	return r;
}
