//===- Passes.td - conversions out of the fsdp/nn dialects -*- tablegen -*-===//
#ifndef FSDP_CONVERSION_PASSES
#define FSDP_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def ConvertFSDPToLLVM : Pass<"convert-fsdp-to-llvm", "::mlir::ModuleOp"> {
  let summary = "Lower the scheduled, memory-planned step to LLVM dialect "
                "calls of the runtime's C API";
  let description = [{
    Replaces the module's contents by the compiled step of
    runtime/include/fsdp/compiled.h: `llvm.func @fsdp_step(ctx, inputs,
    outputs) -> i32` and `llvm.func @fsdp_step_describe() -> !llvm.ptr`
    (the descriptor: ABI and schedule format versions, world size, grid,
    arena, and the step's schedule document, the JSON of
    `fsdp-translate --fsdp-to-schedule`).

    Every buffer is the arena's base plus its planned offset (a view: its
    root's plus the view offset), every instruction one call of its kernel
    in runtime/include/fsdp/kernels.h with device pointers, sizes and the
    context's stream, every async collective a `fsdp_*_start` whose event
    lands in a slot of the context, and its `fsdp.wait` (or the first later
    use of either buffer) an `fsdp_wait` on that event. The calls, their
    order and their arguments are those of the schedule interpreter
    (fsdp::rt::Executor) in arena mode, including the zero-fill of a buffer
    first bound through a view and the progress test
    (`fsdp_event_query`) after each instruction while collectives are in
    flight in FSDP_PROGRESS_TEST mode, so both compute the same bits. A
    failing call returns its status with `ctx->instruction` naming the
    instruction.

    The step must be memory-planned (an arena offset for every buffer, as
    fsdp-pipeline leaves it). An op without a lowering is an error at the
    op naming it; the lowerings are the table in
    lib/Conversion/FSDPToLLVM.cpp, one entry per op of the schedule format
    (include/fsdp/ScheduleFormat.h).
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // FSDP_CONVERSION_PASSES
