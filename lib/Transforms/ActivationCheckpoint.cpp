//===- ActivationCheckpoint.cpp - fsdp-activation-checkpoint --------------===//
//
// Activation checkpointing (Chen et al., "Training Deep Nets with Sublinear
// Memory Cost", 2016; torch.utils.checkpoint; torchtitan's
// activation_checkpoint.mode = full | selective) decided statically: the
// forward of a checkpointed FSDP unit keeps only what the rest of the step
// needs anyway (its inputs and its outputs), and its backward recomputes the
// rest of its forward right before its VJP.
//
// Which unit an op's forward belongs to: the unit of the parameter used most
// recently in program order (an op that reads a parameter belongs to that
// parameter's unit; the parameter-free ops after it, as a block's
// activations and residual add, to the same unit). A *use* of a unit is a
// run of consecutive forward ops of that unit in one micro-batch that reads
// no parameter twice: a unit whose forward runs twice (a module applied
// twice, or one forward per micro-batch) is recomputed once per use, each
// before its own VJP. With ac-regions=block the same rule runs over
// transformer blocks instead of units (a block's parameters may lie in
// several units: DeepSpeed ZeRO-3's per-module gathers under Megatron-LM's
// per-layer checkpoint).
//
// Runs after fsdp-wrap (the units exist) and before fsdp-shard, so that the
// recomputed ops are ordinary backward ops to the later passes: fsdp-shard
// gives them parameter views and param-dtype (the recompute runs in the
// forward's dtype), fsdp-collectives serves them with the backward
// all-gather under full-shard and with the kept forward gather under
// shard-grad-op / keep-gathered.
//
//===----------------------------------------------------------------------===//
#include "ActivationCheckpoint.h"
#include "GlobOptions.h"
#include "fsdp/Analysis/UnfusedAttention.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "fsdp-activation-checkpoint"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPACTIVATIONCHECKPOINT
#include "fsdp/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

/// Under tensor parallelism fsdp-wrap gives a unit's parameters replicated
/// in the group (norms, row-parallel biases) their own buffer,
/// `name.tp_replicated`: one module's forward still, so one use. Were it
/// another unit, the block would be cut into uses at each norm and row bias
/// and every cut value kept (the all-reduced outputs, the norms' inputs and
/// outputs: ~3x the block input full AC keeps); as one use, full AC keeps
/// the block's input alone (its sequence chunk under sequence parallelism)
/// and the recompute repeats the forward's collectives, as Megatron-LM's
/// full recompute does (megatron/core/transformer/transformer_block.py,
/// `_checkpointed_forward`: tensor_parallel.checkpoint keeps the layers'
/// `hidden_states`, the sequence shard under sequence parallelism).
static StringRef tensorParallelUnit(StringRef unit) {
  unit.consume_back(".tp_replicated");
  return unit;
}

/// The unit a parameter's FQN belongs to, without fsdp-wrap's `.frozen`
/// and `.tied_copy` suffixes: a unit's frozen and trainable buffers are one
/// module's forward, and so is a pipeline stage's copy of a tied parameter
/// and the rest of its unit (the last stage's `root.tied_copy`, GPT-2's LM
/// head, is root's, as at pp = 1 and under ac-regions=block).
static StringRef baseUnit(StringRef unit) {
  // fsdp-wrap appends them in the order frozen, tied_copy, tp_replicated.
  unit = tensorParallelUnit(unit);
  unit.consume_back(".tied_copy");
  unit.consume_back(".frozen");
  return unit;
}

/// The tensor-parallel collectives selective AC saves, so that its
/// recompute communicates nothing: torchtitan's _save_list has
/// reduce_scatter_tensor (sequence parallelism's reduce-scatter) for this;
/// Megatron's g (the all-reduce of a row-parallel output) is its analogue
/// without sequence parallelism. An all-gather's output (the whole
/// sequence) is recomputed, as torchtitan does.
static bool tensorParallelSaves(Operation *op) {
  return isa<nn::SpReduceScatterOp, nn::TpAllReduceOp>(op);
}

/// The ops selective AC saves: torchtitan's op-level selective AC saves the
/// outputs of matmuls and scaled-dot-product attention (its _save_list:
/// aten.mm, _scaled_dot_product_*_attention) and recomputes the rest (norms,
/// activations, rope, elementwise), which is cheap in FLOPs and large in
/// bytes. With Megatron-LM's unfused attention (`unfused`: the step's
/// nn.attention marked attention=unfused) it is Korthikanti et al.'s
/// selective recomputation instead (2022, Sec. 5; Megatron-LM's
/// --recompute-activations, CoreAttention under
/// _checkpointed_attention_forward): every output but the core attention's
/// is kept, and the attention is recomputed from the kept q, k, v, so that
/// its 5as²b bytes of scores are not kept across the step.
static bool selectiveSaves(Operation *op, bool unfused) {
  if (unfused)
    return !(isa<nn::AttentionOp>(op) &&
             op->hasAttr(mlir::fsdp::kAttentionImplAttr));
  return isa<nn::LinearOp, nn::MatmulOp, nn::AttentionOp>(op) ||
         tensorParallelSaves(op);
}

/// Whether PyTorch runs `op` as aten.mm, the op torchtitan's op-level policy
/// counts: nn.matmul (a 2-D product of flattened views) and nn.linear
/// without a bias (at::linear → matmul → mm). A linear with a bias is
/// aten.addmm (at::linear's fused 2-D/3-D path, GPT-2's Conv1D), which is in
/// neither the count nor the save list.
static bool isTorchMm(Operation *op) {
  if (auto linear = dyn_cast<nn::LinearOp>(op))
    return !linear.getBias();
  return isa<nn::MatmulOp>(op);
}

/// The ops of one use of a checkpointed unit that torchtitan's op-level
/// selective AC saves (torchtitan models/llama/parallelize_llama.py,
/// _apply_ac_to_transformer_block, selective_ac_option = "op"): the outputs
/// of scaled-dot-product attention and of every aten.mm but every second
/// one. Its policy counts mms from 1 in a fresh `meta` per checkpointed
/// forward (selective_checkpointing_context_fn), so the count restarts at
/// each use and the 2nd, 4th... mm of the use is recomputed.
static llvm::DenseSet<Operation *> selectiveOpSaves(ArrayRef<Operation *> ops) {
  llvm::DenseSet<Operation *> saved;
  int64_t mms = 0;
  for (Operation *op : ops)
    if (isa<nn::AttentionOp>(op) || (isTorchMm(op) && ++mms % 2 == 1))
      saved.insert(op);
  return saved;
}

llvm::DenseSet<Operation *>
mlir::fsdp::checkpointSaves(ArrayRef<Operation *> ops,
                            ActivationCheckpoint mode, bool unfusedAttention) {
  switch (mode) {
  case ActivationCheckpoint::None:
    return llvm::DenseSet<Operation *>(ops.begin(), ops.end());
  case ActivationCheckpoint::Full:
    return {};
  case ActivationCheckpoint::Selective: {
    llvm::DenseSet<Operation *> saved;
    for (Operation *op : ops)
      if (selectiveSaves(op, unfusedAttention))
        saved.insert(op);
    return saved;
  }
  case ActivationCheckpoint::SelectiveOp:
    return selectiveOpSaves(ops);
  }
  llvm_unreachable("unknown activation checkpointing mode");
}

namespace {
/// One use of a unit: consecutive forward ops of one unit in one micro-batch.
struct UnitUse {
  std::string unit;
  SmallVector<Operation *> ops;
};

/// A checkpointed use's recomputation: the ops whose results backward reads
/// (and what they need, unless kept), and those reads.
struct RecomputePlan {
  unsigned use;
  SetVector<Operation *> recompute; // in program order after sorting
  SmallVector<OpOperand *> backwardUses;
};

/// Recomputes the checkpointed units' forward in backward. Before (a use of
/// unit blk, and a backward op that reads one of its activations):
///   %h = nn.linear %x, %w1      // blk
///   %a = nn.gelu %h             // blk
///   %y = nn.linear %a, %w2      // blk: the use's output, kept
///   ...
///   %dw2 = nn.matmul %dy, %a {transpose_a = true}
/// after (full), right before that backward op:
///   %h2 = nn.linear %x, %w1 {nn.recompute = "blk"}
///   %a2 = nn.gelu %h2 {nn.recompute = "blk"}
///   %dw2 = nn.matmul %dy, %a2 {transpose_a = true}
/// (selective keeps %h, a matmul's output, and recomputes %a alone).
class Recomputation {
public:
  Recomputation(func::FuncOp fn, ActivationCheckpoint mode)
      : fn(fn), mode(mode), phases(fn) {
    fn.walk([&](nn::AttentionOp op) {
      unfusedAttention |= op->hasAttr(mlir::fsdp::kAttentionImplAttr);
    });
  }

  void run(const llvm::StringMap<std::string> &unitOfFqn,
           const llvm::StringSet<> &checkpointed, bool fusedSwiglu) {
    collectUses(unitOfFqn);
    if (mode != ActivationCheckpoint::None)
      recomputeUnits(checkpointed);
    // After the units' recomputation: a SwiGLU it recomputes already has no
    // forward silu that backward reads.
    if (fusedSwiglu)
      recomputeSwigluGates();
  }

private:
  void recomputeUnits(const llvm::StringSet<> &checkpointed) {
    SmallVector<RecomputePlan> plans = planUses(checkpointed);
    for (RecomputePlan &plan : plans)
      apply(plan);
    // The outputs torchtitan's policy saves, marked for the memory plan's
    // torch-eager model (nn::kAcSavedAttr): an informative marker, which
    // changes nothing the plan or the runtime does.
    if (mode == ActivationCheckpoint::SelectiveOp)
      for (const UnitUse &use : uses)
        if (checkpointed.contains(use.unit))
          for (Operation *op : selectiveOpSaves(use.ops))
            op->setAttr(nn::kAcSavedAttr,
                        StringAttr::get(fn.getContext(), use.unit));
  }

  /// The forward ops, attributed to units and cut into uses.
  void collectUses(const llvm::StringMap<std::string> &unitOfFqn) {
    Block &block = fn.getBody().front();
    if (Operation *loss = lossDefiningOp(fn))
      lossOps.insert(loss);
    for (Operation &op : block)
      if (op.hasAttr(nn::kMicroBatchLossAttr))
        lossOps.insert(&op);
    std::string current;
    int64_t currentMb = -2;
    llvm::DenseSet<Value> readInUse; // the parameters the current use read
    for (Operation &op : block.without_terminator()) {
      auto [mb, backward] = phases.phaseOf(&op);
      if (backward)
        continue;
      if (mb != currentMb)
        current.clear(); // a micro-batch's forward starts afresh
      std::string unit = current;
      SmallVector<Value> params;
      for (Value v : op.getOperands())
        if (auto arg = dyn_cast<BlockArgument>(v))
          if (auto fqn = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                         nn::kParamAttr)) {
            if (params.empty())
              unit = unitOfFqn.lookup(fqn.getValue());
            params.push_back(v);
          }
      if (unit.empty()) // before the first parameter: no unit's
        continue;
      // A new use: another unit, another micro-batch, or a parameter this
      // use has read already (the module runs again).
      if (uses.empty() || unit != current || mb != currentMb ||
          llvm::any_of(params,
                       [&](Value p) { return readInUse.contains(p); })) {
        uses.push_back({unit, {}});
        readInUse.clear();
      }
      readInUse.insert(params.begin(), params.end());
      current = unit;
      currentMb = mb;
      uses.back().ops.push_back(&op);
      useOf[&op] = uses.size() - 1;
    }
  }

  /// Per checkpointed use, what to recompute. Decided on the step as it is,
  /// before any clone.
  SmallVector<RecomputePlan> planUses(const llvm::StringSet<> &checkpointed) {
    SmallVector<RecomputePlan> plans;
    for (auto [idx, use] : llvm::enumerate(uses)) {
      if (!checkpointed.contains(use.unit))
        continue;
      RecomputePlan plan = planUse(idx);
      if (!plan.recompute.empty())
        plans.push_back(std::move(plan));
    }
    return plans;
  }

  RecomputePlan planUse(unsigned idx) {
    auto inUse = [&](Operation *op) {
      auto it = useOf.find(op);
      return it != useOf.end() && it->second == idx;
    };
    // Kept from the forward: the loss, constants (free to keep), the use's
    // outputs (read by a forward op outside it, which keeps them anyway),
    // under selective AC the matmul and attention outputs, under
    // selective-op the attention outputs and every other mm's.
    llvm::DenseSet<Operation *> saves =
        checkpointSaves(uses[idx].ops, mode, unfusedAttention);
    auto kept = [&](Operation *op) {
      if (lossOps.contains(op) || isa<arith::ConstantOp>(op) ||
          saves.contains(op))
        return true;
      for (Operation *user : op->getUsers())
        if (!inUse(user) && !phases.phaseOf(user).second)
          return true;
      return false;
    };
    RecomputePlan plan{idx, {}, {}};
    SmallVector<Operation *> worklist;
    for (Operation *op : uses[idx].ops) {
      if (kept(op))
        continue;
      bool readByBackward = false;
      for (OpResult r : op->getResults())
        for (OpOperand &u : r.getUses())
          if (phases.phaseOf(u.getOwner()).second &&
              !isa<func::ReturnOp>(u.getOwner())) {
            plan.backwardUses.push_back(&u);
            readByBackward = true;
          }
      if (readByBackward)
        worklist.push_back(op);
    }
    // What those ops need, recomputed too unless kept.
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!plan.recompute.insert(op))
        continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp())
          if (inUse(def) && !kept(def))
            worklist.push_back(def);
    }
    return plan;
  }

  /// Clones the ops right before the first backward op that reads the use's
  /// activations (its VJP, as torch.utils.checkpoint recomputes in the unit's
  /// backward) and points backward's reads at the clones.
  void apply(RecomputePlan &plan) {
    OpBuilder b(fn.getContext());
    SmallVector<Operation *> ops = plan.recompute.takeVector();
    llvm::sort(
        ops, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
    Operation *first = plan.backwardUses.front()->getOwner();
    for (OpOperand *u : plan.backwardUses)
      if (u->getOwner()->isBeforeInBlock(first))
        first = u->getOwner();
    b.setInsertionPoint(first);
    IRMapping map;
    StringAttr unit = b.getStringAttr(uses[plan.use].unit);
    for (Operation *op : ops) {
      Operation *clone = b.clone(*op, map);
      clone->setAttr(nn::kRecomputeAttr, unit);
    }
    for (OpOperand *u : plan.backwardUses)
      u->set(map.lookup(u->get()));
    LLVM_DEBUG(llvm::dbgs()
               << "unit " << unit.getValue() << " (use " << plan.use
               << "): " << ops.size() << " op(s) recomputed before "
               << first->getName() << " at " << first->getLoc() << "\n");
  }

  /// fused-swiglu: Megatron-LM's SwiGLUFunction keeps its input [gate, up]
  /// and its backward (swiglu_back) computes silu(gate) again, so the
  /// forward's silu(gate) lives only until the product. Each forward nn.silu
  /// that feeds only nn.mul (SwiGLU's gate) and that backward reads (the
  /// product's VJP, d up = d out * silu(gate)) is cloned right before its
  /// first backward reader, as the fused backward recomputes it; the clone
  /// is a recomputed op (nn.recompute, its use's unit) to the later passes.
  void recomputeSwigluGates() {
    SmallVector<nn::SiluOp> gates;
    for (auto &entry : useOf)
      if (auto silu = dyn_cast<nn::SiluOp>(entry.first))
        if (llvm::all_of(silu->getUsers(), [&](Operation *u) {
              return phases.phaseOf(u).second || isa<nn::MulOp>(u);
            }))
          gates.push_back(silu);
    // The clones in program order, whatever the map's order.
    llvm::sort(gates, [](nn::SiluOp x, nn::SiluOp y) {
      return x->isBeforeInBlock(y);
    });
    for (nn::SiluOp silu : gates) {
      RecomputePlan plan{useOf.lookup(silu), {}, {}};
      for (OpOperand &u : silu->getUses())
        if (phases.phaseOf(u.getOwner()).second &&
            !isa<func::ReturnOp>(u.getOwner()))
          plan.backwardUses.push_back(&u);
      if (plan.backwardUses.empty())
        continue;
      plan.recompute.insert(silu);
      apply(plan);
    }
  }

  func::FuncOp fn;
  ActivationCheckpoint mode;
  /// The step's attention is unfused: selective is Korthikanti's.
  bool unfusedAttention = false;
  StepPhases phases;
  llvm::DenseSet<Operation *> lossOps;
  SmallVector<UnitUse> uses;
  llvm::DenseMap<Operation *, unsigned> useOf;
};

/// Each parameter's checkpoint region (`unitOfFqn`) and the regions in
/// fsdp-wrap's unit order: its unit without the `.frozen`, `.tied_copy`
/// and `.tp_replicated` suffixes (baseUnit), or with ac-regions=block its
/// transformer block (`root` outside every block).
static SmallVector<std::string>
mapUnits(ArrayRef<UnitOp> unitOps, AcRegions regions,
         llvm::StringMap<std::string> &unitOfFqn) {
  SmallVector<std::string> unitNames;
  for (UnitOp unit : unitOps) {
    StringRef base = baseUnit(unit.getSymName());
    for (Attribute attr : unit.getParams()) {
      StringRef fqn = cast<StringAttr>(attr).getValue();
      std::string name = base.str();
      if (regions == AcRegions::Block) {
        name = transformerBlockOf(fqn);
        if (name.empty())
          name = "root";
      }
      if (!llvm::is_contained(unitNames, name))
        unitNames.push_back(name);
      unitOfFqn[fqn] = name;
    }
  }
  return unitNames;
}

struct FSDPActivationCheckpointPass
    : mlir::fsdp::impl::FSDPActivationCheckpointBase<
          FSDPActivationCheckpointPass> {
  using Base::Base;

protected:
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode == ActivationCheckpoint::None && !acUnits.empty()) {
      module.emitError() << "fsdp-activation-checkpoint: ac-units needs "
                            "activation-checkpoint=full, selective or "
                            "selective-op";
      return signalPassFailure();
    }
    if (mode == ActivationCheckpoint::None && !fusedSwiglu)
      return;
    auto unitOps = llvm::to_vector(module.getOps<UnitOp>());
    if (unitOps.empty()) {
      module.emitError() << "fsdp-activation-checkpoint: the module declares "
                            "no FSDP unit (run fsdp-wrap first)";
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> fn = getStepFunction(module);
    if (failed(fn))
      return signalPassFailure();
    llvm::StringMap<std::string> unitOfFqn;
    llvm::StringSet<> checkpointed;
    if (mode == ActivationCheckpoint::None) {
      mapUnits(unitOps, acRegions, unitOfFqn);
    } else {
      if (failed(selectUnits(unitOps, unitOfFqn, checkpointed)))
        return signalPassFailure();
      if (!checkpointed.empty()) // else ac-units names other stages' units
        module->setAttr(nn::kActivationCheckpointAttr,
                        StringAttr::get(&getContext(),
                                        stringifyActivationCheckpoint(mode)));
    }
    Recomputation(*fn, checkpointed.empty() ? ActivationCheckpoint::None : mode)
        .run(unitOfFqn, checkpointed, fusedSwiglu);
  }

  /// The parameters' units and the checkpointed units: those ac-units names,
  /// else every unit but the root (torchtitan checkpoints each transformer
  /// block, not the embeddings, final norm and head that fsdp-wrap's root
  /// unit holds).
  LogicalResult selectUnits(ArrayRef<UnitOp> unitOps,
                            llvm::StringMap<std::string> &unitOfFqn,
                            llvm::StringSet<> &checkpointed) {
    ModuleOp module = getOperation();
    SmallVector<std::string> unitNames =
        mapUnits(unitOps, acRegions, unitOfFqn);
    SmallVector<StringRef> names(unitNames.begin(), unitNames.end());
    bool blocks = acRegions == AcRegions::Block;
    if (failed(matchGlobs(
            module, "fsdp-activation-checkpoint: ac-units", acUnits, names,
            blocks ? "transformer block" : "FSDP unit",
            [&](size_t k) { checkpointed.insert(names[k]); },
            blocks ? "blocks" : "units")))
      return failure();
    if (acUnits.empty())
      for (const std::string &name : unitNames)
        if (name != "root")
          checkpointed.insert(name);
    // On a pipeline stage, ac-units may name only other stages' units
    // (fsdp-pipeline fails on a pattern no stage matched), and a stage of
    // only the embedding or only the head (pp-split-embedding,
    // pp-split-loss) has no block to checkpoint by default.
    if (checkpointed.empty() && !pipelineStageModule(module)) {
      if (acRegions == AcRegions::Block)
        return module.emitError()
               << "fsdp-activation-checkpoint: no transformer block to "
                  "checkpoint (ac-regions=block): no parameter's FQN has a "
                  "block index (name the rest with ac-units=root)";
      return module.emitError()
             << "fsdp-activation-checkpoint: no unit to checkpoint: the only "
                "unit is 'root' (name it with ac-units=root)";
    }
    return success();
  }
};
} // namespace
