// The JSON schedule reads the memory plan that fsdp-memory-plan recorded on
// the step (fsdp.memory_plan) and refuses one that does not fit the step:
// the step changed after the plan was made, or the record was edited into
// something that is no plan. The input is memory-plan-report.mlir's step,
// planned, then edited.
// RUN: fsdp-opt %S/../Transforms/memory-plan-report.mlir --fsdp-memory-plan -o %t.mlir
// RUN: fsdp-translate %t.mlir --fsdp-to-schedule -o /dev/null
// A changed op (the update's rate) or one op fewer is another step.
// RUN: sed -e 's/lr = 1.000000e-03/lr = 2.000000e-03/' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=STALE
// RUN: grep -v "fsdp.free %9" %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=STALE
// STALE: error: 'fsdp.memory_plan' was made for another step: the step changed after fsdp-memory-plan (run it again, last)
// RUN: sed -e 's/peak_bytes = 160 : i64, //' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=INT
// INT: error: 'fsdp.memory_plan' has no integer 'peak_bytes'
// RUN: sed -e 's/frees = array<i64: [0-9, ]*>/frees = 1 : i64/' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=ARRAY
// ARRAY: error: 'fsdp.memory_plan' has no array<i64> 'frees'
// RUN: sed -e 's/max_bytes_by_class = {[^}]*}/max_bytes_by_class = 0 : i64/' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=DICT
// DICT: error: 'fsdp.memory_plan' has no dictionary 'max_bytes_by_class'
// RUN: sed -e 's/grad = 0 : i64, //' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=CLASS
// CLASS: error: 'fsdp.memory_plan' 'peak_bytes_by_class' has no integer 'grad'
// phase_peak_bytes (what the advisor extrapolates) is optional, but when
// present it holds groups of five that are phases.
// RUN: sed -e 's/phase_peak_bytes = array<i64: [0-9, -]*>, //' %t.mlir | fsdp-translate --fsdp-to-schedule -o /dev/null
// RUN: sed -e 's/phase_peak_bytes = array<i64: -1, 0, 160, 40, 0, -1, 1, 148, 0, 0, -2, 1, 92, 0, 0>/phase_peak_bytes = array<i64: -1, 0>/' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=PHASES
// PHASES: error: 'fsdp.memory_plan' has a 'phase_peak_bytes' of 2 values, not groups of 5
// RUN: sed -e 's/phase_peak_bytes = array<i64: -1, 0, 160, 40, 0, -1, 1, 148, 0, 0, -2, 1, 92, 0, 0>/phase_peak_bytes = array<i64: -1, 7, 161, 0, 0, -1, 1, 148, 0, 0, -2, 1, 92, 0, 0>/' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=PHASE
// PHASE: error: 'fsdp.memory_plan' has a 'phase_peak_bytes' entry (-1, 7, 161, 0, 0) that is no phase
// RUN: sed -e 's/peak_instruction = 5/peak_instruction = 99/' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=PEAK
// PEAK: error: 'fsdp.memory_plan' has peak_instruction 99 outside the step's 16 instructions
// RUN: sed -e 's/classes = \["data", "data",/classes = ["data",/' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=CLASSES
// CLASSES: error: 'fsdp.memory_plan' needs 'classes', one class per buffer (22)
// RUN: sed -e 's/arena_offsets = array<i64: [0-9]*, /arena_offsets = array<i64: /' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=OFFSETS
// OFFSETS: error: 'fsdp.memory_plan' needs 'arena_offsets', one offset per buffer (22), got 21
// RUN: sed -e 's/"temporary"/"heap"/' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=NAME
// NAME: error: 'fsdp.memory_plan' has "heap" in 'classes', which is no memory class
// RUN: sed -e 's/views = array<i64: 8, 7, 9, 7, 10, 7, 18, 17>/views = array<i64: 8, 7, 9, 7, 10, 7, 18>/' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=PAIRS
// PAIRS: error: 'fsdp.memory_plan' 'views' must hold pairs, got 7 numbers
// RUN: sed -e 's/frees = array<i64: 6, 7,/frees = array<i64: 6, 99,/' %t.mlir | not fsdp-translate --fsdp-to-schedule 2>&1 | FileCheck %s --check-prefix=RANGE
// RANGE: error: 'fsdp.memory_plan' 'frees' has the pair (6, 99) outside the step
