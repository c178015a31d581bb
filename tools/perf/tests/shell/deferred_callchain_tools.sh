#!/bin/bash
# Deferred callchains: perf's other tools read a deferred recording
# SPDX-License-Identifier: GPL-2.0
#
# No kernel needed: 'perf test -w deferredstream views' writes every kind of
# deferred sample, as a pipe and (through perf inject) as a file. The tools
# beyond script, report and inject read it without a crash or a sanitizer
# report: those that show stacks show the joined ones, those that need
# other events say so and exit.

set -e

deferred_test=deferred_tools
# shellcheck source=lib/deferred_callchain.sh
. "$(dirname "$0")"/lib/deferred_callchain.sh

out="${tmpdir}/out"

perf test -w deferredstream views >"${tmpdir}/views.pipe"
perf inject -i - -o "${tmpdir}/views.data" <"${tmpdir}/views.pipe"

# perf trace -i: its tool's callbacks were NULL but for a few, and the
# session called the others (lost, exit, the records) through NULL.
perf_run "${out}" trace -i "${tmpdir}/views.data" || true
perf_run "${out}" trace -i - <"${tmpdir}/views.pipe" || true

# perf data convert --to-json: a file without hostname or arch headers
# (this one has none) gets null for them; each sample's callchain is the
# joined one: kernel part, then the user frames of its record.
rm -f "${tmpdir}/views.json"
if perf_run_any "${out}" data convert --to-json "${tmpdir}/views.json" \
	-i "${tmpdir}/views.data"; then
	if ! python3 - "${tmpdir}/views.json" <<'EOF'
import json, sys

doc = json.load(open(sys.argv[1]))
samples = doc["samples"]
chains = [[frame.get("symbol") for frame in s["callchain"]] for s in samples]
assert len(samples) == 8, f"{len(samples)} samples, not 8"
# joined: the user frames of the record, after the kernel ones
joined = [c for c in chains if c[-3:] == ["deferredstream_leaf", "deferredstream_mid",
                                         "deferredstream_top"]]
assert len(joined) == 4, f"{len(joined)} samples joined with the deep stack: {chains}"
# unresolved: the kernel part alone, no frame of perf
unresolved = [c for c in chains if not any(c)]
assert len(unresolved) == 2, f"{len(unresolved)} samples with no user frame: {chains}"
assert doc["headers"]["hostname"] is None
EOF
	then
		fail "perf data convert --to-json: not the joined stacks"
	fi
fi

# perf diff of the file with itself: the same, no crash.
perf_run "${out}" diff "${tmpdir}/views.data" "${tmpdir}/views.data" || true

# Tools that need events this recording lacks say so and exit.
perf_run_any "${out}" lock report -i "${tmpdir}/views.data" || true
perf_run_any "${out}" c2c report --stdio -i "${tmpdir}/views.data" || true
perf_run_any "${out}" archive "${tmpdir}/views.data" || true
perf_run_any "${out}" kwork report -i "${tmpdir}/views.data" || true
perf_run_any "${out}" annotate --stdio -i "${tmpdir}/views.data" || true

cleanup
exit ${err}
