# SPDX-License-Identifier: GPL-2.0
# Shared settings of the testbed scripts: where things live and how to fail.
# Sourced, never run.
# shellcheck shell=bash

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
TREE=${TREE:-$BUILD/linux}
BASE_TARBALL=/usr/src/linux-source-6.12.tar.xz
JOBS=${JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/defer-ccache}

die() {
	echo "${0##*/}: $*" >&2
	exit 1
}

note() {
	echo "${0##*/}: $*" >&2
}

# Top-level folders of this repository that are overlay: those the base
# kernel tree has too. Anything else (harness/, demo/, build/) is ours.
overlay_dirs() {
	local d
	for d in "$TOP"/*/; do
		d=${d%/}
		d=${d##*/}
		[ "$d" = build ] && continue
		git -C "$TREE" cat-file -e "base:$d" 2>/dev/null && echo "$d"
	done
	return 0
}

# Every overlay file, relative to the top, sorted.
overlay_files() {
	local dirs
	mapfile -t dirs < <(overlay_dirs)
	[ ${#dirs[@]} -eq 0 ] && return 0
	(cd "$TOP" && find "${dirs[@]}" -type f | LC_ALL=C sort)
}

# A digest of the overlay's names and contents: tells whether it changed.
overlay_stamp() {
	(cd "$TOP" && overlay_files | tr '\n' '\0' | xargs -0 -r sha256sum) |
		sha256sum | cut -d' ' -f1
}

# The tree object of the assembled tree's working copy, untracked files
# included, computed on a copy of its index so the tree's own index is
# left alone.
worktree_tree() {
	local idx
	idx=$(mktemp)
	cp "$TREE/.git/index" "$idx"
	GIT_INDEX_FILE=$idx git -C "$TREE" add -A
	GIT_INDEX_FILE=$idx git -C "$TREE" write-tree
	rm -f "$idx"
}

tree_git() {
	git -C "$TREE" -c user.name=testbed -c user.email=testbed@localhost \
		-c core.autocrlf=false "$@"
}
