/*===- compiled.h - the ABI of a compiled training step ---------*- C -*-===//
 *
 * `fsdp-compile SCHEDULED.mlir -o STEP.so` lowers a scheduled, memory-planned
 * step (--convert-fsdp-to-llvm, lib/Conversion/FSDPToLLVM.cpp) to machine
 * code that calls the runtime's C API (runtime.h, kernels.h) and nothing
 * else. The shared object exports two C functions:
 *
 *   const fsdp_step_descriptor *fsdp_step_describe(void);
 *   int fsdp_step(fsdp_step_context *ctx, const void *const *inputs,
 *                 void **outputs);
 *
 * fsdp_step_describe describes the step so that a host binds it without a
 * JSON file: the ABI and schedule format versions, the world size and grid,
 * the arena, and the step's schedule document (runtime/docs/
 * schedule-format.md: units, buffers, inputs and outputs with roles, the
 * memory plan; its instructions are what fsdp_step runs as machine code).
 *
 * fsdp_step runs one step: it copies every non-state input from inputs[i]
 * (host memory, the input's bytes) to its arena slot, issues every
 * instruction's kernel or collective on ctx->stream / the grid's channels,
 * waits for every collective, and sets outputs[j] to the device memory of
 * output j (inside the arena, or the state buffer it aliases). The state
 * inputs live at their arena slots (the host wrote them there). It is the
 * step plan of the document (fsdp/schedule/StepPlan.h, arena mode) as
 * machine code: the calls, with the arguments, that the executor makes when
 * it interprets the same plan, so both compute the same bits. Returns FSDP_OK,
 * or the status of the first failing runtime call with ctx->instruction naming
 * its instruction
 * (-1 while binding inputs, -2 at the end of the step) and fsdp_last_error()
 * its message; the events of collectives still in flight are then left in
 * ctx->events (non-NULL slots), for the host to wait on.
 *
 * A pipeline-parallel step (pp = P > 1, docs/pipeline-parallel.md) is one
 * shared object with every stage: fsdp_step_describe then describes the job
 * (pipeline_stages = P, pipeline_stage = -1, world_size N, the whole
 * pipeline document with its "stages"; no arena, inputs or instructions),
 * and stage s's step and descriptor are fsdp_step_stage<s> and
 * fsdp_step_describe_stage<s> (the same ABI as the two above, world_size
 * N / P, the stage's program as its document). A rank binds the symbols of
 * its stage (rank / (N / P)); one file serves every rank, as the JSON
 * document does. fsdp.send / fsdp.recv run on ctx->pipeline.
 *
 *===----------------------------------------------------------------------===*/
#ifndef FSDP_COMPILED_H
#define FSDP_COMPILED_H

#include "fsdp/runtime.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The layout of fsdp_step_context and fsdp_step_descriptor below. */
#define FSDP_STEP_ABI_VERSION 3

/* The exported symbols' names. */
#define FSDP_STEP_SYMBOL "fsdp_step"
#define FSDP_STEP_DESCRIBE_SYMBOL "fsdp_step_describe"
/* Appended to both names with the stage's index for a pipeline stage
 * (fsdp_step_stage0, fsdp_step_describe_stage0, ...). */
#define FSDP_STEP_STAGE_SUFFIX "_stage"

/* What fsdp_step runs on; the host fills it before each call (8-byte fields
 * at offsets 0, 8, ..., 72: the compiled code addresses them so). */
typedef struct fsdp_step_context {
  fsdp_device device;
  fsdp_stream stream;                   /* the device's compute stream */
  void *arena;                          /* arena_bytes at arena_alignment */
  fsdp_channel world, shard, replicate; /* the grid's channels */
  fsdp_event *events;  /* num_events slots, all NULL on entry */
  int64_t instruction; /* written by fsdp_step: the instruction running */
  fsdp_channel tensor; /* the tensor-parallel group's channel (ABI 2) */
  /* Pipeline parallelism: one rank per stage, this rank's index in its
   * stage (fsdp.send / fsdp.recv; NULL without pipeline stages; ABI 3). */
  fsdp_channel pipeline;
} fsdp_step_context;

typedef struct fsdp_step_descriptor {
  int32_t abi_version;    /* FSDP_STEP_ABI_VERSION */
  int32_t format_version; /* the schedule format (fsdp/ScheduleFormat.h) */
  int64_t world_size, replicas, shard_size;
  int64_t arena_bytes, arena_alignment;
  int64_t num_inputs, num_outputs, num_instructions;
  int64_t num_events;   /* collectives of one step (event slots) */
  int64_t peak_bytes;   /* live schedule bytes' high-water mark (the plan's) */
  const char *schedule; /* the step's schedule document (JSON) */
  int64_t schedule_bytes;
  /* ABI 3: the pipeline's stages P (1 without) and the stage this
   * descriptor's step runs (0 without; -1 for a pipeline's job
   * descriptor, fsdp_step_describe of a P > 1 object). */
  int64_t pipeline_stages, pipeline_stage;
} fsdp_step_descriptor;

typedef const fsdp_step_descriptor *(*fsdp_step_describe_fn)(void);
typedef int (*fsdp_step_fn)(fsdp_step_context *ctx, const void *const *inputs,
                            void **outputs);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FSDP_COMPILED_H */
