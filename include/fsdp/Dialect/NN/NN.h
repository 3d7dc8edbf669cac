//===- NN.h - the nn dialect: model graph ops and interfaces --------------===//
#ifndef FSDP_DIALECT_NN_NN_H
#define FSDP_DIALECT_NN_NN_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fsdp/schedule/Format.h" // ODS default attribute values

#include "fsdp/Dialect/NN/NNEnums.h.inc"
#include "fsdp/Dialect/NN/NNInterfaces.h.inc"
#include "fsdp/Dialect/NN/NNOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/NN/NNAttrs.h.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/NN/NNOps.h.inc"

namespace mlir::nn {

/// Argument/result attribute names used across the pipeline.
inline constexpr llvm::StringLiteral kParamAttr =
    "nn.param"; // FQN of a parameter
inline constexpr llvm::StringLiteral kTrainableAttr =
    "nn.trainable"; // bool, default true
inline constexpr llvm::StringLiteral kInitAttr =
    "nn.init"; // fsdp/InitSpec.h: zeros|ones|uniform(a)|normal(s)|constant(v)
inline constexpr llvm::StringLiteral kDataAttr =
    "nn.data"; // features|labels|tokens|targets
inline constexpr llvm::StringLiteral kStepAttr =
    "nn.step"; // unit: 1-based optimizer step
inline constexpr llvm::StringLiteral kTotalStepsAttr =
    "nn.total_steps"; // unit: the run's total optimizer steps (fsdp-run's)
inline constexpr llvm::StringLiteral kLossScaleAttr =
    "nn.loss_scale"; // unit: the dynamic loss scale (tensor<f64>, fsdp-run's)
inline constexpr llvm::StringLiteral kLossAttr =
    "nn.loss"; // result: the scalar loss
inline constexpr llvm::StringLiteral kLrAttr =
    "nn.lr"; // result: the step's learning rate (tensor<f64>)
inline constexpr llvm::StringLiteral kGradNormAttr =
    "nn.grad_norm"; // result: the total gradient norm before clipping
inline constexpr llvm::StringLiteral kGradOfAttr =
    "nn.grad_of"; // result: gradient of FQN
inline constexpr llvm::StringLiteral kOptStateAttr =
    "nn.opt_state"; // exp_avg|exp_avg_sq
inline constexpr llvm::StringLiteral kParamOfAttr =
    "nn.param_of"; // FQN an opt state belongs to
inline constexpr llvm::StringLiteral kTiedAttr =
    "nn.tied"; // FQNs tied to this parameter
/// Op attributes: the autodiff seed constant; the micro-batch an op computes
/// (fsdp-micro-batch); the loss op of a micro-batch; a gradient accumulation.
inline constexpr llvm::StringLiteral kLossSeedAttr = "nn.loss_seed";
inline constexpr llvm::StringLiteral kMicroBatchAttr = "nn.micro_batch";
inline constexpr llvm::StringLiteral kMicroBatchLossAttr =
    "nn.micro_batch_loss";
inline constexpr llvm::StringLiteral kAccumulateAttr = "nn.accumulate";
/// fsdp-autodiff under sequence parallelism: the backward's second
/// all-gather (nn.sp_all_gather) of a sequence chunk that the forward
/// gathered for column-parallel linears, read by their weight gradients
/// (Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication keeps the
/// chunk and gathers it again in backward). A backward op although it reads
/// no gradient (fsdp-pipeline-micro-batch); overlapped with the
/// grad-input GEMMs issued after it (the simulator).
inline constexpr llvm::StringLiteral kSpRegatherAttr = "nn.sp_regather";
/// fsdp-activation-checkpoint: a forward op recomputed in backward (the
/// name of the checkpointed FSDP unit), and on the module the mode
/// (`full` or `selective`).
inline constexpr llvm::StringLiteral kRecomputeAttr = "nn.recompute";
/// fsdp-activation-checkpoint under selective-op: a forward op whose output
/// torchtitan's policy saves (MUST_SAVE; the name of the checkpointed FSDP
/// unit). Eager PyTorch's selective checkpoint caches such an output until
/// the unit's recomputation pops it (torch/utils/checkpoint.py,
/// _CachingTorchDispatchMode / _CachedTorchDispatchMode), even where the
/// backward never reads it: framework-memory=torch-eager counts that
/// (lib/Analysis/FrameworkMemory.cpp).
inline constexpr llvm::StringLiteral kAcSavedAttr = "nn.ac_saved";
inline constexpr llvm::StringLiteral kActivationCheckpointAttr =
    "nn.activation_checkpoint";

/// The element type of nn.cross_entropy's loss (and of the gradient
/// nn.cross_entropy_grad takes) for logits of element type `logits`: f32 for
/// bf16/f16, else `logits`. torch.autocast runs cross_entropy (its
/// log_softmax and the mean) in f32, and transformers' ForCausalLMLoss
/// upcasts the logits with .float(), so a mixed-precision loss keeps f32's
/// resolution (bf16's 8 bits would step by 2^-5 at a loss of 5) and the
/// backward's seed (times a loss scale up to 2^127) is f32.
Type lossElementType(Type logits);

/// Recomputes the result types of `op` from its current operands and
/// attributes when it implements InferTypeOpInterface (and those of nn.cast,
/// which keeps its element type and follows its input's shape); a no-op for
/// other ops. Fails, with the op's diagnostic emitted at its location, if the
/// operands are inconsistent. Used after a pass changes operand types (batch
/// split, micro-batches, param-dtype).
llvm::LogicalResult reinferResultTypes(Operation *op);
/// Before reinferResultTypes after a pass changed `op`'s operands: whether
/// the rows (dimension 0) of its first operand differ from its first
/// result's, i.e. the op now sees another split of the batch.
bool rowsChanged(Operation *op);

/// The most bytes one tensor may occupy: 2^59 (512 PiB; 2^56 elements of
/// up to 8 bytes, fsdp-import's limit), so that the planner's sums of the
/// sizes of a step's live tensors stay far inside int64.
inline constexpr int64_t kMaxTensorBytes = int64_t(1) << 59;

/// Bytes of a statically shaped tensor of int or float elements:
/// numel × ⌈element bits / 8⌉. nullopt when `type` is not such a tensor or
/// its size does not fit in kMaxTensorBytes (computed without overflow).
/// The one definition of a tensor's size in the compiler: the nn verifiers
/// reject a tensor for which it is nullopt, so passes and analyses may use
/// tensorBytes below.
std::optional<int64_t> checkedTensorBytes(Type type);

/// checkedTensorBytes for a tensor the verifiers have accepted (bytes).
int64_t tensorBytes(Type type);

/// The schedule format's name of an element type the planner and the runtime
/// support: "f32", "f64", "bf16", "f16", "i32" or "i64"; "" for any other.
llvm::StringRef dtypeName(Type t);

/// Formats a shape as "[a, b, c]" for diagnostics.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

} // namespace mlir::nn

#endif // FSDP_DIALECT_NN_NN_H
