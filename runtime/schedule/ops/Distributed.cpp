//===- Distributed.cpp - the fsdp ops: rules and runtime calls ------------===//
//
// The collectives (fsdp.all_gather, fsdp.reduce_scatter, fsdp.all_reduce,
// and the tensor group's nn.tp_* / nn.sp_*: started here, waited on where
// the step plan's bookkeeping puts the wait), fsdp.local_shard, fsdp.pack /
// fsdp.unpack (buckets), fsdp.flatten, and the ops that only bind or end
// buffers (fsdp.param_view, fsdp.wait, fsdp.free).
//
//===----------------------------------------------------------------------===//
#include "../OpDefs.h"
#include "../PlanBuilder.h"
#include "../ShapeUtil.h"

namespace fsdp::schedule {

namespace {

Arg reduction(const OpLowering &l) {
  return l.i32(l.in.average() ? FSDP_REDUCE_AVG : FSDP_REDUCE_SUM);
}

void validateGatherScatter(const Checker &c) {
  c.need(1, 1);
  bool ag = c.in.kind == OpKind::AllGather;
  int64_t shard = ag ? c.o[0] : c.r[0], full = ag ? c.r[0] : c.o[0];
  if (c.desc(shard).dtype != c.desc(full).dtype)
    c.fail("operand and result dtypes differ");
  if (!ag && !isFloatDType(c.desc(full).dtype) && c.in.average())
    c.fail("'avg' needs a float buffer");
  Group group = c.in.group();
  int64_t g = c.prog.groupSize(group);
  if (c.desc(full).numel != c.desc(shard).numel * g)
    c.fail("full buffer " + std::to_string(full) + " has " +
           std::to_string(c.desc(full).numel) + " elements, expected shard " +
           std::to_string(c.desc(shard).numel) + " x " + groupName(group) +
           " group size " + std::to_string(g));
}

void lowerGatherScatter(OpLowering &l) {
  bool ag = l.in.kind == OpKind::AllGather;
  int64_t src = l.o[0], dst = l.r[0];
  const BufferDesc &shard = l.desc(ag ? src : dst);
  Arg ch = l.channel(l.in.group()), from = l.buf(src), to = l.buf(dst);
  Arg event = l.startCollective(src, dst);
  if (ag)
    l.call("fsdp_all_gather_start",
           {ch, from, to, l.i64(shard.numel), l.dtypeArg(shard.dtype), event});
  else
    l.call("fsdp_reduce_scatter_start",
           {ch, from, to, l.i64(shard.numel), l.dtypeArg(shard.dtype),
            reduction(l), event});
}

void validateAllReduce(const Checker &c) {
  c.need(1, 1);
  // The sum over the stages (the gradient norm under pipeline parallelism).
  if (c.in.group() == Group::Pipeline && c.prog.pipelineStages() <= 1)
    c.fail("group 'pipeline' needs a pipeline-parallel schedule (one "
           "program per stage)");
  c.sameDType(c.o[0], c.r[0]);
  if (!isFloatDType(c.desc(c.o[0]).dtype) && c.in.average())
    c.fail("'avg' needs a float buffer");
  c.sameNumel(c.o[0], c.r[0]);
}

void lowerAllReduce(OpLowering &l) {
  Arg ch = l.channel(l.in.group()), x = l.operand(0), y = l.result(0);
  Arg event = l.startCollective(l.o[0], l.r[0]);
  l.call("fsdp_all_reduce_start",
         {ch, x, y, l.i64(l.desc(l.r[0]).numel), l.t(), reduction(l), event});
}

/// Megatron's f (nn.tp_copy: a copy, the input is already replicated) and
/// g (nn.tp_all_reduce: the sum over the tensor-parallel group, waited on at
/// its result's first use).
void validateTp(const Checker &c) {
  c.need(1, 1);
  c.sameDType(c.o[0], c.r[0]);
  c.sameNumel(c.o[0], c.r[0]);
  if (!isFloatDType(c.desc(c.o[0]).dtype))
    c.fail("needs a float buffer");
}

void lowerTp(OpLowering &l) {
  int64_t n = l.desc(l.r[0]).numel;
  if (l.in.kind == OpKind::TpCopy) {
    l.call("fsdp_memcpy", {l.stream(), l.result(0), l.operand(0),
                           l.i64(n * dtypeSize(l.desc(l.r[0]).dtype))});
    return;
  }
  Arg ch = l.channel(Group::Tensor), x = l.operand(0), y = l.result(0);
  Arg event = l.startCollective(l.o[0], l.r[0]);
  l.call("fsdp_all_reduce_start",
         {ch, x, y, l.i64(n), l.t(), l.i32(FSDP_REDUCE_SUM), event});
}

/// Sequence parallelism (Korthikanti et al. 2022, Sec. 4.2.2): a tensor
/// [outer..., s, inner...] cut along dimension `dim` into the T chunks of
/// the tensor group. Seen as [outer][T][chunk] (whole) and [outer][chunk]
/// (this rank's), the T chunks of each outer row are contiguous, so the
/// collectives run once per outer row (once when `dim` is 0) on the
/// channel's contiguous buffers, with no reordering copy.
struct SequenceChunks {
  int64_t outer = 1, chunk = 1, T = 1;
};

SequenceChunks sequenceChunks(const std::vector<int64_t> &whole, int64_t dim,
                              int64_t T) {
  SequenceChunks s;
  s.T = T;
  for (size_t k = 0; k < whole.size(); ++k) {
    int64_t d = static_cast<int64_t>(k);
    if (d < dim)
      s.outer *= whole[k];
    else if (d == dim)
      s.chunk *= whole[k] / T;
    else
      s.chunk *= whole[k];
  }
  return s;
}

void validateSp(const Checker &c) {
  c.need(1, 1);
  c.sameDType(c.o[0], c.r[0]);
  if (!isFloatDType(c.desc(c.o[0]).dtype))
    c.fail("needs a float buffer");
  bool gather = c.in.kind == OpKind::SpAllGather;
  const BufferDesc &whole = c.desc(gather ? c.r[0] : c.o[0]);
  const BufferDesc &part = c.desc(gather ? c.o[0] : c.r[0]);
  int64_t dim = c.in.integer("dim"), tp = c.in.integer("tp");
  int64_t T = c.prog.groupSize(Group::Tensor);
  if (tp != T)
    c.fail("tp " + std::to_string(tp) + " is not the schedule's " +
           "tensor_parallel " + std::to_string(T));
  bool ok = dim >= 0 && dim < static_cast<int64_t>(whole.shape.size()) &&
            whole.shape.size() == part.shape.size();
  for (size_t k = 0; ok && k < whole.shape.size(); ++k)
    ok = static_cast<int64_t>(k) == dim ? whole.shape[k] == part.shape[k] * T
                                        : whole.shape[k] == part.shape[k];
  if (!ok)
    c.fail("dimension " + std::to_string(dim) + " of the whole buffer " +
           std::to_string(whole.id) + " must be tensor_parallel " +
           std::to_string(T) + " chunks of buffer " + std::to_string(part.id) +
           "'s, the other dimensions equal");
}

void lowerSp(OpLowering &l) {
  bool gather = l.in.kind == OpKind::SpAllGather;
  int64_t whole = gather ? l.r[0] : l.o[0], part = gather ? l.o[0] : l.r[0];
  SequenceChunks s = sequenceChunks(l.desc(whole).shape, l.in.integer("dim"),
                                    l.prog.groupSize(Group::Tensor));
  DType dt = l.desc(part).dtype;
  int64_t bytes = s.chunk * dtypeSize(dt);
  if (l.in.kind == OpKind::SpSplit) {
    // Chunk t of every outer row: one strided copy.
    l.call("fsdp_memcpy_2d",
           {l.stream(), l.buf(part), l.i64(bytes),
            l.bufAtRank(whole, Group::Tensor, bytes), l.i64(bytes * s.T),
            l.i64(bytes), l.i64(s.outer)});
    return;
  }
  Arg ch = l.channel(Group::Tensor);
  for (int64_t i = 0; i < s.outer; ++i) {
    Arg wholeRow = l.buf(whole, i * bytes * s.T),
        partRow = l.buf(part, i * bytes);
    if (gather)
      l.call("fsdp_all_gather_start",
             {ch, partRow, wholeRow, l.i64(s.chunk), l.dtypeArg(dt),
              l.startCollective(part, whole)});
    else
      l.call("fsdp_reduce_scatter_start",
             {ch, wholeRow, partRow, l.i64(s.chunk), l.dtypeArg(dt),
              l.i32(FSDP_REDUCE_SUM), l.startCollective(whole, part)});
  }
}

void validateLocalShard(const Checker &c) {
  c.need(1, 1);
  c.sameDType(c.o[0], c.r[0]);
  Group group = c.in.group();
  int64_t g = c.prog.groupSize(group);
  if (c.desc(c.o[0]).numel != c.desc(c.r[0]).numel * g)
    c.fail("full buffer " + std::to_string(c.o[0]) + " has " +
           std::to_string(c.desc(c.o[0]).numel) + " elements, expected the " +
           "result's " + std::to_string(c.desc(c.r[0]).numel) + " x " +
           groupName(group) + " group size " + std::to_string(g));
}

void lowerLocalShard(OpLowering &l) {
  // This rank's slice [i*s, (i+1)*s) of the full buffer, i its rank in the
  // group.
  int64_t bytes = l.desc(l.r[0]).bytes;
  l.call("fsdp_memcpy",
         {l.stream(), l.result(0), l.bufAtRank(l.o[0], l.in.group(), bytes),
          l.i64(bytes)});
}

//===--- Buckets and flat buffers -----------------------------------------===//

void validatePackUnpack(const Checker &c) {
  bool pack = c.in.kind == OpKind::Pack;
  const std::vector<int64_t> &parts = pack ? c.o : c.r;
  int64_t bucket = pack ? c.r[0] : c.o[0];
  if (pack)
    c.need(c.o.size(), 1);
  else
    c.need(1, c.r.size());
  if (parts.size() < 2)
    c.fail("a bucket needs at least two unit buffers");
  int64_t blocks = c.in.integer("blocks");
  if (blocks < 1)
    c.fail("blocks must be >= 1, got " + std::to_string(blocks));
  int64_t total = 0;
  for (int64_t id : parts) {
    if (c.desc(id).dtype != c.desc(bucket).dtype)
      c.fail("unit buffer " + std::to_string(id) + " and bucket " +
             std::to_string(bucket) + " have different dtypes");
    if (c.desc(id).numel % blocks != 0)
      c.fail("unit buffer " + std::to_string(id) + " of " +
             std::to_string(c.desc(id).numel) + " elements is not " +
             std::to_string(blocks) + " blocks");
    total += c.desc(id).numel;
  }
  if (total != c.desc(bucket).numel)
    c.fail("bucket " + std::to_string(bucket) + " has " +
           std::to_string(c.desc(bucket).numel) + " elements, its units " +
           std::to_string(total));
}

void lowerPackUnpack(OpLowering &l) {
  // Block b of the bucket is block b of each unit buffer in turn (FSDP2's
  // all-gather copy-in / copy-out): one strided copy per unit.
  bool pack = l.in.kind == OpKind::Pack;
  const std::vector<int64_t> &parts = pack ? l.o : l.r;
  int64_t bucket = pack ? l.r[0] : l.o[0];
  int64_t blocks = l.in.integer("blocks");
  int64_t es = dtypeSize(l.desc(bucket).dtype), row = 0;
  for (int64_t id : parts)
    row += l.desc(id).numel / blocks * es;
  int64_t at = 0;
  for (int64_t id : parts) {
    int64_t width = l.desc(id).numel / blocks * es;
    if (pack)
      l.call("fsdp_memcpy_2d",
             {l.stream(), l.buf(bucket, at), l.i64(row), l.buf(id),
              l.i64(width), l.i64(width), l.i64(blocks)});
    else
      l.call("fsdp_memcpy_2d",
             {l.stream(), l.buf(id), l.i64(width), l.buf(bucket, at),
              l.i64(row), l.i64(width), l.i64(blocks)});
    at += width;
  }
}

void validateFlatten(const Checker &c) {
  c.need(c.o.size(), 1);
  const std::vector<int64_t> &offsets = c.in.ints("offsets");
  if (offsets.size() != c.o.size())
    c.fail(std::to_string(c.o.size()) + " operands but " +
           std::to_string(offsets.size()) + " offsets");
  for (size_t i = 0; i < c.o.size(); ++i) {
    c.floatSame({c.o[i], c.r[0]});
    if (offsets[i] < 0 ||
        offsets[i] + c.desc(c.o[i]).numel > c.desc(c.r[0]).numel)
      c.fail("operand " + std::to_string(c.o[i]) + " at offset " +
             std::to_string(offsets[i]) + " does not fit in " +
             std::to_string(c.desc(c.r[0]).numel) + " elements");
  }
}

void lowerFlatten(OpLowering &l) {
  std::vector<int64_t> numels;
  for (int64_t id : l.o)
    numels.push_back(l.desc(id).numel);
  l.call("fsdp_flatten", {l.stream(), l.t(), l.buffers(l.o), l.int64s(numels),
                          l.int64s(l.in.ints("offsets")),
                          l.i32(static_cast<int64_t>(l.o.size())), l.result(0),
                          l.i64(l.desc(l.r[0]).numel)});
}

//===--- Ops without calls ------------------------------------------------===//

void validateParamView(const Checker &c) {
  c.need(1, 1);
  if (c.desc(c.r[0]).viewOf < 0 ||
      c.desc(c.r[0]).rootId != c.desc(c.o[0]).rootId)
    c.fail("result buffer " + std::to_string(c.r[0]) +
           " must be a view_of operand buffer " + std::to_string(c.o[0]));
}

void validateWait(const Checker &c) {
  c.need(1, 1);
  const BufferDesc &r = c.desc(c.r[0]), &o = c.desc(c.o[0]);
  if (r.viewOf < 0 || r.rootId != o.rootId || r.rootOffset != o.rootOffset ||
      r.numel != o.numel || r.dtype != o.dtype)
    c.fail("result buffer " + std::to_string(c.r[0]) +
           " must be a whole view_of operand buffer " + std::to_string(c.o[0]) +
           " (the awaited collective's buffer)");
}

/// Bound when their results are defined; the wait happened before.
void lowerNothing(OpLowering &) {}

/// fsdp.send: the operand to stage `peer` of the pipeline group; its result
/// is a one-element completion buffer (the future's), waited on by
/// fsdp.wait. fsdp.recv: its result from stage `peer`.
void validatePointToPoint(const Checker &c) {
  bool send = c.in.kind == OpKind::Send;
  c.need(send ? 1 : 0, 1);
  if (send && c.desc(c.r[0]).numel != 1)
    c.fail("the completion buffer " + std::to_string(c.r[0]) +
           " must have one element");
  int64_t peer = c.in.integer("peer"), stages = c.prog.pipelineStages();
  if (peer < 0 || peer >= stages || peer == c.prog.pipelineStage())
    c.fail("peer stage " + std::to_string(peer) +
           " is not another stage of the pipeline's " + std::to_string(stages) +
           " (this is stage " + std::to_string(c.prog.pipelineStage()) + ")");
  // The upper bound is the communicator's MPI_TAG_UB, which fsdp-run
  // queries and checks before step 1 (checkSameJobOnAllRanks).
  if (c.in.integer("tag") < 0)
    c.fail("tag " + std::to_string(c.in.integer("tag")) + " is negative");
}

void lowerPointToPoint(OpLowering &l) {
  bool send = l.in.kind == OpKind::Send;
  int64_t data = send ? l.o[0] : l.r[0];
  const BufferDesc &d = l.desc(data);
  Arg ch = l.channel(Group::Pipeline);
  // The event covers the data buffer (and the completion buffer): the
  // step plan waits before either is touched again.
  Arg event = l.startCollective(data, l.r[0]);
  l.call(send ? "fsdp_send_start" : "fsdp_recv_start",
         {ch, l.buf(data), l.i64(d.numel), l.dtypeArg(d.dtype),
          l.i32(static_cast<int32_t>(l.in.integer("peer"))),
          l.i32(static_cast<int32_t>(l.in.integer("tag"))), event});
}

} // namespace

std::vector<OpDef> distributedOps() {
  return {
      {OpKind::AllGather,
       {groupAttr(kDefaultGroup), reductionAttr()},
       validateGatherScatter,
       lowerGatherScatter},
      {OpKind::ReduceScatter,
       {groupAttr(kDefaultGroup), reductionAttr()},
       validateGatherScatter,
       lowerGatherScatter},
      {OpKind::AllReduce,
       {groupAttr(kDefaultAllReduceGroup, /*pipeline=*/true), reductionAttr()},
       validateAllReduce,
       lowerAllReduce},
      {OpKind::TpCopy, {}, validateTp, lowerTp},
      {OpKind::TpAllReduce, {}, validateTp, lowerTp},
      {OpKind::SpAllGather,
       {integer("dim", kRequired), integer("tp", kRequired),
        flag("replicated_grad")},
       validateSp,
       lowerSp},
      {OpKind::SpReduceScatter,
       {integer("dim", kRequired), integer("tp", kRequired)},
       validateSp,
       lowerSp},
      {OpKind::SpSplit,
       {integer("dim", kRequired), integer("tp", kRequired)},
       validateSp,
       lowerSp},
      {OpKind::LocalShard,
       {groupAttr(kDefaultGroup)},
       validateLocalShard,
       lowerLocalShard},
      {OpKind::Pack,
       {integer("blocks", kRequired, 1)},
       validatePackUnpack,
       lowerPackUnpack},
      {OpKind::Unpack,
       {integer("blocks", kRequired, 1)},
       validatePackUnpack,
       lowerPackUnpack},
      {OpKind::Flatten, {ints("offsets")}, validateFlatten, lowerFlatten},
      {OpKind::Free,
       {},
       [](const Checker &c) { c.need(1, 0); },
       [](OpLowering &l) { l.release(l.o[0]); }},
      {OpKind::ParamView, {}, validateParamView, lowerNothing},
      {OpKind::Wait, {}, validateWait, lowerNothing},
      {OpKind::Send,
       {integer("peer", kRequired), integer("tag", kRequired), flag("async")},
       validatePointToPoint,
       lowerPointToPoint},
      {OpKind::Recv,
       {integer("peer", kRequired), integer("tag", kRequired), flag("async")},
       validatePointToPoint,
       lowerPointToPoint},
  };
}

} // namespace fsdp::schedule
