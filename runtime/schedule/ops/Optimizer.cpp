//===- Optimizer.cpp - updates, schedules and clipping: rules and calls ---===//
//
// nn.sgd_update and nn.adamw_update (through fsdp_optimizer_update, with
// weight-decay groups at this rank's shard offset), nn.lr_schedule, and the
// global-norm clipping ops nn.sum_squares, nn.grad_norm and nn.scale.
//
//===----------------------------------------------------------------------===//
#include "../OpDefs.h"
#include "../PlanBuilder.h"
#include "../ShapeUtil.h"

namespace fsdp::schedule {

namespace {

/// `no_decay`: ascending, disjoint [begin, end) pairs of flat elements.
void checkNoDecay(const Checker &c) {
  const std::vector<int64_t> &nd = c.in.ints("no_decay");
  int64_t last = 0;
  if (nd.size() % 2 != 0)
    c.fail("attribute 'no_decay' must hold [begin, end) pairs");
  for (size_t i = 0; i < nd.size(); i += 2) {
    if (nd[i] < last || nd[i + 1] <= nd[i])
      c.fail("attribute 'no_decay' must hold ascending, non-empty, disjoint "
             "ranges, got [" +
             std::to_string(nd[i]) + ", " + std::to_string(nd[i + 1]) + ")");
    last = nd[i + 1];
  }
}

/// With `skip_if_nonfinite` the last operand is the global gradient norm
/// that skips the update when it is not finite; an lr operand comes before
/// it.
size_t skipOperands(const Instruction &in) {
  return in.flag("skip_if_nonfinite") ? 1 : 0;
}

/// The update's optional scalars after its `fixed` operands: the rate (when
/// present) and the skip norm (with skip_if_nonfinite).
void checkUpdateScalars(const Checker &c, size_t fixed) {
  size_t skip = skipOperands(c.in);
  size_t lr = c.o.size() >= fixed + skip + 1 ? 1 : 0;
  c.need(fixed + lr + skip, c.r.size());
  if (lr)
    c.f64Scalar(c.o[fixed], "the learning rate");
  if (skip)
    c.f64Scalar(c.o.back(), "the skip norm");
}

void validateSgd(const Checker &c) {
  const auto &o = c.o, &r = c.r;
  c.need(std::max<size_t>(o.size(), 2), 1);
  checkUpdateScalars(c, 2);
  c.wideFloat({o[0], o[1], r[0]});
  c.floatSame({o[0], o[1], r[0]});
  c.sameNumel(o[0], o[1]);
  c.sameNumel(o[0], r[0]);
  checkNoDecay(c);
}

void validateAdamw(const Checker &c) {
  const auto &o = c.o, &r = c.r;
  c.need(std::max<size_t>(o.size(), 5), 3);
  checkUpdateScalars(c, 5);
  c.wideFloat({o[0], o[1], o[2], o[3], r[0], r[1], r[2]});
  c.floatSame({o[0], o[1], o[2], o[3], r[0], r[1], r[2]});
  for (int64_t id : {o[1], o[2], o[3], r[0], r[1], r[2]})
    c.sameNumel(o[0], id);
  if (!isIntDType(c.desc(o[4]).dtype) || c.desc(o[4]).numel != 1)
    c.fail("step must be an i64 scalar");
  checkNoDecay(c);
}

/// Both updates through fsdp_optimizer_update: the rate from device memory
/// when the update has an lr operand; weight-decay groups at this rank's
/// shard offset (read from the shard channel at run time, so that one
/// compiled step serves every rank).
void lowerUpdate(OpLowering &l) {
  const Instruction &in = l.in;
  bool adam = in.kind == OpKind::AdamwUpdate;
  size_t lrAt = adam ? 5 : 2, skip = skipOperands(in);
  int64_t n = l.desc(l.r[0]).numel;
  const std::vector<int64_t> &noDecay = in.ints("no_decay");
  Arg flatOffset = in.flag("sharded") && !noDecay.empty()
                       ? l.rankTimes(Group::Shard, n)
                       : l.i64(0);
  auto opt = [&](bool isResult, size_t i) {
    return adam ? (isResult ? l.result(i) : l.operand(i)) : l.null();
  };
  l.call("fsdp_optimizer_update",
         {l.stream(),
          l.t(),
          l.i32(adam),
          l.operand(0),
          l.operand(1),
          opt(false, 2),
          opt(false, 3),
          opt(false, 4),
          adam ? l.dtypeArg(l.desc(l.o[4]).dtype) : l.i32(FSDP_I64),
          l.result(0),
          opt(true, 1),
          opt(true, 2),
          l.i64(n),
          l.o.size() > lrAt + skip ? l.operand(lrAt) : l.null(),
          l.f64(in.number("lr")),
          l.f64(in.number("beta1")),
          l.f64(in.number("beta2")),
          l.f64(in.number("eps")),
          l.f64(in.number("weight_decay")),
          l.int64s(noDecay),
          l.i64(static_cast<int64_t>(noDecay.size())),
          flatOffset,
          skip ? l.operand(l.o.size() - 1) : l.null()});
}

/// Both updates read every hyperparameter (SGD ignores the betas and eps),
/// each defaulting to the schedule's optimizer section.
std::vector<AttrSpec> updateAttrs() {
  return {optimizerNumber("lr", &OptimizerDesc::lr),
          optimizerNumber("beta1", &OptimizerDesc::beta1),
          optimizerNumber("beta2", &OptimizerDesc::beta2),
          optimizerNumber("eps", &OptimizerDesc::eps),
          optimizerNumber("weight_decay", &OptimizerDesc::weightDecay),
          ints("no_decay"),
          flag("sharded"),
          flag("skip_if_nonfinite")};
}

//===--- Learning-rate schedules ------------------------------------------===//

int lrKindOf(const Instruction &in) {
  return kLrSchedules[in.integer("kind")].value;
}

void validateLrSchedule(const Checker &c) {
  const auto &o = c.o;
  c.need(o.size() == 2 ? 2 : 1, 1);
  if (!isIntDType(c.desc(o[0]).dtype) || c.desc(o[0]).numel != 1)
    c.fail("step must be an i64 scalar");
  int kind = lrKindOf(c.in);
  int64_t decay = c.in.integer("decay_steps");
  double lr = c.in.number("lr"), minLr = c.in.number("min_lr");
  // The second operand: the run's total steps (a total_steps input).
  if (o.size() == 2 &&
      (c.desc(o[1]).dtype != DType::I64 || c.desc(o[1]).numel != 1 ||
       kind == FSDP_LR_CONSTANT || decay != 0))
    c.fail("the total steps operand must be an i64 scalar of a linear or "
           "cosine schedule with decay_steps 0");
  c.f64Scalar(c.r[0], "the learning rate");
  if (!(lr > 0) || !(minLr >= 0) || !(minLr <= lr) ||
      c.in.integer("warmup_steps") < 0 ||
      (kind != FSDP_LR_CONSTANT && o.size() == 1 && decay < 1))
    c.fail("expects lr > 0, min_lr in [0, lr], warmup_steps >= 0 and "
           "(linear, cosine) decay_steps >= 1 or a total steps operand");
}

void lowerLrSchedule(OpLowering &l) {
  const Instruction &in = l.in;
  l.call("fsdp_lr_schedule",
         {l.stream(), l.operand(0), l.dtypeArg(l.desc(l.o[0]).dtype),
          l.result(0), l.i32(lrKindOf(in)), l.f64(in.number("lr")),
          l.i64(in.integer("warmup_steps")),
          l.o.size() > 1 ? l.operand(1) : l.null(),
          l.i64(in.integer("decay_steps")), l.f64(in.number("min_lr"))});
}

std::vector<AttrSpec> lrScheduleAttrs() {
  std::vector<const char *> kinds;
  for (const LrScheduleInfo &k : kLrSchedules)
    kinds.push_back(k.name);
  return {choice("kind", kinds, 0, kRequired), number("lr", kRequired),
          integer("warmup_steps", kRequired), integer("decay_steps", kRequired),
          number("min_lr", kRequired)};
}

//===--- Gradient clipping ------------------------------------------------===//

void validateSumSquares(const Checker &c) {
  c.need(1, 1);
  c.floatSame({c.o[0]});
  c.f64Scalar(c.r[0], "the sum of squares");
}

/// Operands: Σ g², and optionally the loss scale the gradients carry.
void validateGradNorm(const Checker &c) {
  c.need(c.o.size() == 2 ? 2 : 1, 2);
  c.f64Scalar(c.o[0], "the sum of squares");
  if (c.o.size() == 2)
    c.f64Scalar(c.o[1], "the loss scale");
  c.f64Scalar(c.r[0], "the norm");
  c.f64Scalar(c.r[1], "the clip coefficient");
  if (!(c.in.number("max_norm") >= 0))
    c.fail("max_norm must be > 0");
}

void validateScale(const Checker &c) {
  c.need(2, 1);
  c.floatSame({c.o[0], c.r[0]});
  c.sameNumel(c.o[0], c.r[0]);
  c.f64Scalar(c.o[1], "the scale");
}

} // namespace

std::vector<OpDef> optimizerOps() {
  return {
      {OpKind::SgdUpdate, updateAttrs(), validateSgd, lowerUpdate},
      {OpKind::AdamwUpdate, updateAttrs(), validateAdamw, lowerUpdate},
      {OpKind::LrSchedule, lrScheduleAttrs(), validateLrSchedule,
       lowerLrSchedule},
      {OpKind::SumSquares,
       {},
       validateSumSquares,
       [](OpLowering &l) {
         l.call("fsdp_sum_squares",
                {l.stream(), l.dtypeArg(l.desc(l.o[0]).dtype), l.operand(0),
                 l.i64(l.desc(l.o[0]).numel), l.result(0)});
       }},
      {OpKind::GradNorm,
       {number("max_norm")},
       validateGradNorm,
       [](OpLowering &l) {
         l.call("fsdp_grad_norm",
                {l.stream(), l.operand(0), l.f64(l.in.number("max_norm")),
                 l.o.size() == 2 ? l.operand(1) : l.null(), l.result(0),
                 l.result(1)});
       }},
      {OpKind::Scale,
       {},
       validateScale,
       [](OpLowering &l) {
         l.call("fsdp_scale", {l.stream(), l.t(), l.operand(0), l.operand(1),
                               l.result(0), l.i64(l.desc(l.r[0]).numel)});
       }},
  };
}

} // namespace fsdp::schedule
