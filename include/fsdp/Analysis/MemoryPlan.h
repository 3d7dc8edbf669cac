//===- MemoryPlan.h - liveness, per-rank peak and arena offsets -----------===//
//
// The memory planner's analysis over the scheduled step function: every SSA
// tensor is a buffer (views alias their base), live from the instruction that
// defines it (function arguments: from the start of the step) to its last use
// or its explicit fsdp.free (returned values: to the end of the step). The
// training state (every argument that is not data or the step) is resident:
// live for the whole step. A returned state value that replaces an argument
// at the next step (same fsdp.role and fsdp.unit) takes that argument's
// memory when nothing reads the argument after it is written -- the
// optimizer update writing the new shard over the old one element by
// element, as XLA's input/output aliasing does -- so the state is held once.
// Likewise a gradient accumulation (nn.add marked nn.accumulate) whose
// running sum dies at it writes the new sum over the running one: with
// micro-batches one buffer per unit accumulates the gradient (its reduced
// shard with accumulate=sharded), as PyTorch FSDP accumulates into one
// sharded .grad, instead of one per micro-batch.
// fsdp-memory-plan records the plan on the step (MemoryPlanRecord.h), and
// the JSON schedule takes its `frees`, `aliases` and arena offsets from that
// record, so the runtime allocates exactly this plan; the independent check
// of the planned peak is the allocator's own high-water mark (fsdp-run
// --alloc per-buffer, test/lit/Integration/device-peak.test). fsdp-schedule
// computes plans of candidate schedules with this analysis directly.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_ANALYSIS_MEMORYPLAN_H
#define FSDP_ANALYSIS_MEMORYPLAN_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace mlir::fsdp {

/// The classes of memory the report splits bytes into.
enum class MemoryClass {
  ParamShard,    // this rank's shard of the parameters
  GatheredParam, // a unit's full parameters after all-gather
  OptState,      // AdamW moments (shards)
  Grad,          // gradients of activations and parameters
  GradShard,  // a unit's reduced gradient (this rank's shard, or the whole for
              // DDP)
  CommBuffer, // a unit's packed gradient, sent to the reduction
  Activation, // values computed in forward
  Temporary,  // constants and other scratch
  Data,       // the micro-batch (features, labels, tokens, targets)
  Scalar,     // the optimizer step and other scalars
};
llvm::StringRef memoryClassName(MemoryClass c);
/// The class of a memoryClassName, if it is one.
std::optional<MemoryClass> memoryClassFromName(llvm::StringRef name);
inline constexpr unsigned kNumMemoryClasses = 10;

/// Whether `v`, a comm_buffer, is read by a reduction (reduce-scatter or
/// all-reduce), directly or through the casts and packs that make its input:
/// a unit's flat gradient and its reduce-dtype copy. PyTorch FSDP2 allocates
/// these on the compute stream (foreach_reduce's reduce_scatter_input, made
/// before it enters the reduce-scatter stream, freed by the compute stream
/// after waiting for the reduce-scatter: torch/distributed/fsdp/_fully_shard/
/// _fsdp_collectives.py foreach_reduce, _fsdp_param_group.py post_backward),
/// the other send buffers (all-gather inputs) on the all-gather copy-in
/// stream (foreach_all_gather).
bool isReductionInput(Value v);

/// The comm_buffer class split by that stream, bytes per rank: the
/// reductions' inputs (isReductionInput) and the other send buffers, each at
/// the step's peak and at its own most over the step.
struct SendBufferBytes {
  int64_t gatherMax = 0, gatherAtPeak = 0, reduceMax = 0, reduceAtPeak = 0;
};

/// One buffer of the plan.
struct PlannedBuffer {
  Value value;
  int64_t bytes = 0; // fsdp::bufferBytes of the value (0 for views)
  MemoryClass cls = MemoryClass::Temporary;
  int64_t viewOf = -1;    // index of the owning buffer for a view, else -1
  int64_t viewOffset = 0; // in elements of the owner
  int64_t start = -1;     // first instruction it is live at (-1: step start)
  int64_t end = -1; // last instruction it is live at (#instructions: step end)
  int64_t arenaOffset = -1; // bytes from the arena's base (views: -1)
  int64_t aliases = -1;     // the state argument whose memory it takes, or -1
  int64_t inPlaceOf = -1;   // the dying operand whose memory it takes over at
                            // its instruction (a gradient accumulation), or -1
};

/// Liveness, peak and static offsets of the step function `fn` (a single
/// block; instructions are its ops in order, without the terminator).
class MemoryPlan {
public:
  /// Fails with a diagnostic on a value that is not a statically shaped
  /// tensor (or !fsdp.future of one) of f32, f64, bf16, f16, i32 or i64.
  /// `arenaOffsets` false leaves every buffer without an arena offset and
  /// arenaBytes at -1 (the peaks and classes are the same): for planners
  /// that never run the step (fsdp-memory-plan's arena-offsets=false).
  static FailureOr<MemoryPlan> compute(func::FuncOp fn,
                                       bool arenaOffsets = true);

  std::vector<PlannedBuffer> buffers;     // arguments, then results in op order
  llvm::DenseMap<Value, int64_t> indexOf; // value → buffer index
  std::vector<Operation *> instructions;
  std::vector<std::vector<int64_t>>
      freesAfter;                 // buffer indices freed after instruction i
  std::vector<int64_t> liveBytes; // bytes live while instruction i runs
  /// Of liveBytes, the gathered parameters and the all-gathers' send
  /// buffers (SendBufferBytes' gather side) at instruction i: what the
  /// allocator's stream pools are measured against (addAllocatorToReport).
  std::vector<int64_t> gatheredLiveBytes, gatherSendLiveBytes;
  int64_t peakBytes = 0; // max of liveBytes (and the step's start)
  std::vector<int64_t>
      scratchBytes; // the cpu driver's kernel scratch and in-flight MPI
                    // reductions' temporaries at instruction i
                    // (fsdp/schedule/KernelScratch.h)
  int64_t peakBytesWithScratch = 0; // max of liveBytes + scratchBytes
  int64_t peakInstruction = -1; // index of the first instruction at the peak
  std::vector<int64_t>
      peakBytesByClass; // live bytes per MemoryClass at the peak
  std::vector<int64_t>
      maxBytesByClass; // per MemoryClass, its most live bytes at any point
                       // of the step (a class can peak elsewhere than the
                       // step does: a large gradient after the activations)
  SendBufferBytes sendBytes;    // comm_buffer split by the stream FSDP2 uses
  int64_t arenaBytes = 0;       // size of one arena holding every buffer (-1:
                                // not placed, compute's arenaOffsets false)
  int64_t lossInstruction = -1; // forward ends here

  /// Alignment of arena offsets, bytes (the runtime's allocation alignment).
  static constexpr int64_t kAlignment = 64;

private:
  // compute's steps, in order.
  /// The instructions, and a buffer per argument and result (views: of
  /// their owner) with its class.
  LogicalResult collectBuffers(func::FuncOp fn);
  /// The last instruction reading each owning buffer (async collectives until
  /// their wait).
  std::vector<int64_t> lastUses() const;
  /// Where each buffer ends (carried state: at the step's end) and which are
  /// freed after each instruction.
  void assignLifetimes(func::FuncOp fn, const std::vector<int64_t> &lastUse);
  /// liveBytes, the peak and the bytes per class; returns the bytes live at
  /// the step's start.
  int64_t sweepLiveBytes();
  /// scratchBytes and peakBytesWithScratch.
  void addKernelScratch(int64_t atStart);
  /// The buffer index owning `v`'s memory (a view's owner, else its own).
  int64_t ownerOf(Value v) const;
  void assignArenaOffsets();
  /// Sets PlannedBuffer::aliases of the returned state values that can take
  /// their argument's memory (lastUse: the last instruction reading each
  /// buffer, async collectives until their wait).
  void assignAliases(func::FuncOp fn, const std::vector<int64_t> &lastUse);
  /// Sets PlannedBuffer::inPlaceOf of each gradient accumulation (nn.add
  /// marked nn.accumulate) whose running sum, operand 0, dies at it: the sum
  /// is written over it element by element (kernels.h: outputs may alias
  /// inputs), and the running sum's buffer lives on as the new sum's.
  void assignInPlace(func::FuncOp fn, const std::vector<int64_t> &lastUse);
  /// Extends each buffer written over by in-place sums to the last sum's
  /// end: the chain is one allocation (after assignLifetimes).
  void extendInPlaceChains();
};

} // namespace mlir::fsdp

#endif // FSDP_ANALYSIS_MEMORYPLAN_H
