//===- DialectTest.cpp - facts the fsdp/nn dialects define once -----------===//
//
// The ODS defaults of the collectives' and nn.gelu's enum attributes are the
// schedule format's defaults (the runtime applies those to attributes a
// schedule leaves out); every strategy round-trips through its IR spelling; the
// one tensor-size definition refuses sizes it cannot hold; the nn shape rules
// are InferTypeOpInterface's, which nn::reinferResultTypes and the builders
// use; every op of the schedule format has a lowering in
// --convert-fsdp-to-llvm (a new op of ScheduleFormat.h needs its entry there).
//
//===----------------------------------------------------------------------===//
#include "fsdp/Conversion/Passes.h"
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"
#include "fsdp/Transforms/Passes.h"
#include "fsdp/schedule/Format.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

TEST(DialectFacts, EnumDefaultsAreTheScheduleFormatDefaults) {
  MLIRContext ctx;
  ctx.loadDialect<mlir::fsdp::FSDPDialect, func::FuncDialect>();
  // Collectives that leave `group` and `op` out: their ODS defaults.
  const char *ir = R"mlir(
    module attributes {fsdp.world_size = 2 : i64} {
      fsdp.unit @u params ["w"] {element_type = f32, inits = ["zeros"],
        shapes = [array<i64: 4>], trainable = array<i1: true>,
        offsets = array<i64: 0>, numel = 4 : i64, padded_numel = 4 : i64,
        shard_numel = 2 : i64}
      func.func @f(%s: tensor<2xf32>, %g: tensor<4xf32>) {
        %a = fsdp.all_gather @u %s : tensor<2xf32> -> tensor<4xf32>
        %r = fsdp.reduce_scatter @u %g : tensor<4xf32> -> tensor<2xf32>
        %w = fsdp.all_reduce @u %g : tensor<4xf32> -> tensor<4xf32>
        return
      }
    })mlir";
  OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(ir, &ctx);
  ASSERT_TRUE(m);
  func::FuncOp f = *m->getOps<func::FuncOp>().begin();
  auto ag = *f.getOps<mlir::fsdp::AllGatherOp>().begin();
  auto rs = *f.getOps<mlir::fsdp::ReduceScatterOp>().begin();
  auto ar = *f.getOps<mlir::fsdp::AllReduceOp>().begin();
  EXPECT_EQ(mlir::fsdp::stringifyGroup(ag.getGroup()),
            ::fsdp::schedule::kDefaultGroup);
  EXPECT_EQ(mlir::fsdp::stringifyGroup(rs.getGroup()),
            ::fsdp::schedule::kDefaultGroup);
  EXPECT_EQ(mlir::fsdp::stringifyGroup(ar.getGroup()),
            ::fsdp::schedule::kDefaultAllReduceGroup);
  EXPECT_EQ(mlir::fsdp::stringifyReduction(rs.getOp()),
            ::fsdp::schedule::kDefaultReduction);
  EXPECT_EQ(mlir::fsdp::stringifyReduction(ar.getOp()),
            ::fsdp::schedule::kDefaultReduction);
}

TEST(DialectFacts, GeluDefaultIsTheScheduleFormatDefault) {
  // The ODS default of nn.gelu's `approximate` (NNOps.td), read from an op
  // that does not spell it, is the runtime's default.
  MLIRContext ctx;
  ctx.loadDialect<nn::NNDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"mlir(
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = nn.gelu %x : tensor<4xf32>
  %g = nn.gelu_grad %x, %y : tensor<4xf32>
  return %g : tensor<4xf32>
})mlir",
                                                             &ctx);
  ASSERT_TRUE(module);
  auto fn = *module->getOps<func::FuncOp>().begin();
  EXPECT_EQ(nn::stringifyGeluApproximation(
                (*fn.getOps<nn::GeluOp>().begin()).getApproximate()),
            ::fsdp::schedule::kDefaultGeluApproximation);
  EXPECT_EQ(nn::stringifyGeluApproximation(
                (*fn.getOps<nn::GeluGradOp>().begin()).getApproximate()),
            ::fsdp::schedule::kDefaultGeluApproximation);
  for (uint32_t i = 0; i <= nn::getMaxEnumValForGeluApproximation(); ++i) {
    auto a = static_cast<nn::GeluApproximation>(i);
    std::string text =
        "#nn.approximation<" + nn::stringifyGeluApproximation(a).str() + ">";
    EXPECT_EQ(parseAttribute(text, &ctx),
              nn::GeluApproximationAttr::get(&ctx, a))
        << text;
  }
}

// nn.rope's ODS defaults are the schedule format's (the runtime fills an
// attribute the JSON leaves out, as the printed IR elides a default).
TEST(DialectFacts, RopeDefaultsAreTheScheduleFormatDefaults) {
  MLIRContext ctx;
  ctx.loadDialect<nn::NNDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"mlir(
func.func @f(%x: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %y = nn.rope %x {head_dim = 4 : i64, theta = 10.0 : f64} : tensor<1x2x4xf32> -> tensor<1x2x4xf32>
  return %y : tensor<1x2x4xf32>
})mlir",
                                                             &ctx);
  ASSERT_TRUE(module);
  namespace fs = ::fsdp::schedule;
  auto fn = *module->getOps<func::FuncOp>().begin();
  nn::RopeOp r = *fn.getOps<nn::RopeOp>().begin();
  EXPECT_EQ(r.getRopeType(), fs::kDefaultRopeType);
  EXPECT_EQ(r.getRopeType(), fs::kRopeTypes[FSDP_ROPE_DEFAULT]);
  EXPECT_EQ(r.getFactor().convertToDouble(), fs::kDefaultRopeFactor);
  EXPECT_EQ(r.getLowFreqFactor().convertToDouble(),
            fs::kDefaultRopeLowFreqFactor);
  EXPECT_EQ(r.getHighFreqFactor().convertToDouble(),
            fs::kDefaultRopeHighFreqFactor);
  EXPECT_EQ(static_cast<int64_t>(r.getOriginalMaxPositionEmbeddings()),
            fs::kDefaultRopeOriginalMaxPositions);
  EXPECT_EQ(r.getBetaFast().convertToDouble(), fs::kDefaultRopeBetaFast);
  EXPECT_EQ(r.getBetaSlow().convertToDouble(), fs::kDefaultRopeBetaSlow);
  EXPECT_EQ(r.getTruncate(), fs::kDefaultRopeTruncate);
  EXPECT_EQ(r.getAttentionFactor().convertToDouble(),
            fs::kDefaultRopeAttentionFactor);
  EXPECT_EQ(std::string(fs::kRopeTypes[FSDP_ROPE_LINEAR]), "linear");
  EXPECT_EQ(std::string(fs::kRopeTypes[FSDP_ROPE_LLAMA3]), "llama3");
  EXPECT_EQ(std::string(fs::kRopeTypes[FSDP_ROPE_YARN]), "yarn");
}

TEST(DialectFacts, EveryStrategyRoundTrips) {
  MLIRContext ctx;
  ctx.loadDialect<mlir::fsdp::FSDPDialect>();
  for (uint32_t i = 0; i <= mlir::fsdp::getMaxEnumValForStrategy(); ++i) {
    auto s = static_cast<mlir::fsdp::Strategy>(i);
    Attribute a = mlir::fsdp::StrategyAttr::get(&ctx, s);
    std::string text;
    llvm::raw_string_ostream os(text);
    a.print(os);
    EXPECT_EQ(text, "#fsdp.strategy<\"" +
                        mlir::fsdp::stringifyStrategy(s).str() + "\">");
    EXPECT_EQ(parseAttribute(text, &ctx), a) << text;
  }
}

TEST(DialectFacts, TensorBytesRefusesWhatItCannotHold) {
  MLIRContext ctx;
  Builder b(&ctx);
  auto t = [&](ArrayRef<int64_t> shape, Type elt) {
    return RankedTensorType::get(shape, elt);
  };
  EXPECT_EQ(nn::checkedTensorBytes(t({3, 5}, b.getF32Type())), 60);
  EXPECT_EQ(nn::checkedTensorBytes(t({7}, b.getBF16Type())), 14);
  EXPECT_EQ(nn::checkedTensorBytes(t({}, b.getI64Type())), 8);
  // 2^56 f64 elements are exactly the limit; one more element is not.
  EXPECT_EQ(nn::checkedTensorBytes(t({int64_t(1) << 56}, b.getF64Type())),
            nn::kMaxTensorBytes);
  EXPECT_EQ(nn::checkedTensorBytes(t({(int64_t(1) << 56) + 1}, b.getF64Type())),
            std::nullopt);
  // The issue's example: 2^31 x 2^31 f32 is 2^64 bytes (it used to wrap to
  // -2^63 in the schedule).
  EXPECT_EQ(nn::checkedTensorBytes(
                t({int64_t(1) << 31, int64_t(1) << 31}, b.getF32Type())),
            std::nullopt);
  // A product that overflows int64 itself.
  EXPECT_EQ(nn::checkedTensorBytes(
                t({int64_t(1) << 40, int64_t(1) << 40}, b.getF32Type())),
            std::nullopt);
  EXPECT_EQ(nn::checkedTensorBytes(
                RankedTensorType::get({ShapedType::kDynamic}, b.getF32Type())),
            std::nullopt);
}

TEST(DialectFacts, ShapeRulesReinferThroughInferTypeOpInterface) {
  MLIRContext ctx;
  ctx.loadDialect<nn::NNDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(R"mlir(
func.func @f(%x: tensor<4x3xf32>, %w: tensor<5x3xf32>) -> tensor<4x5xbf16> {
  %y = nn.linear %x, %w : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %c = nn.cast %y : tensor<4x5xf32> -> tensor<4x5xbf16>
  return %c : tensor<4x5xbf16>
})mlir",
                                                             &ctx);
  ASSERT_TRUE(module);
  auto fn = *module->getOps<func::FuncOp>().begin();
  auto linear = *fn.getOps<nn::LinearOp>().begin();
  auto castOp = *fn.getOps<nn::CastOp>().begin();
  EXPECT_TRUE(isa<InferTypeOpInterface>(linear.getOperation()));
  // nn.cast's target element type is its own: no InferTypeOpInterface.
  EXPECT_FALSE(isa<InferTypeOpInterface>(castOp.getOperation()));

  // A batch split, as fsdp-shard makes it: the results follow the input, and
  // the cast keeps its target element type.
  Builder b(&ctx);
  fn.getArgument(0).setType(RankedTensorType::get({2, 3}, b.getF32Type()));
  EXPECT_TRUE(succeeded(nn::reinferResultTypes(linear)));
  EXPECT_TRUE(succeeded(nn::reinferResultTypes(castOp)));
  EXPECT_EQ(linear.getType(), RankedTensorType::get({2, 5}, b.getF32Type()));
  EXPECT_EQ(castOp.getType(), RankedTensorType::get({2, 5}, b.getBF16Type()));

  // The builders without result types infer them.
  OpBuilder ob(castOp);
  auto built = nn::LinearOp::create(ob, linear.getLoc(), fn.getArgument(0),
                                    fn.getArgument(1), Value());
  EXPECT_EQ(built.getType(), linear.getType());
  built.erase();

  // Inconsistent operands: the op's own message, at its location.
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  fn.getArgument(1).setType(RankedTensorType::get({5, 4}, b.getF32Type()));
  EXPECT_TRUE(failed(nn::reinferResultTypes(linear)));
  EXPECT_EQ(message,
            "'nn.linear' op expects weight of shape [out=5, in=3], got [5, 4]");
}

TEST(DialectFacts, EveryScheduleOpHasAnLLVMLowering) {
  // Every op of kOps has a step-plan lowering (runtime/schedule/ops), which
  // both the executor and a compiled step run.
  for (const ::fsdp::schedule::OpInfo &op : ::fsdp::schedule::kOps)
    EXPECT_TRUE(mlir::fsdp::hasLLVMLowering(op.name))
        << op.name << " has no entry in lib/Conversion/FSDPToLLVM.cpp";
  EXPECT_FALSE(mlir::fsdp::hasLLVMLowering("arith.addf"));
}

// The ODS enums of the dialects and the schedule format (Format.h) spell the
// same names, in the same order: the format's lists are what the runtime
// accepts, the enums what the compiler writes.
TEST(DialectFacts, EnumsSpellTheScheduleFormatsNames) {
  namespace schedule = ::fsdp::schedule;
  ASSERT_EQ(mlir::fsdp::getMaxEnumValForStrategy() + 1,
            std::size(schedule::kStrategies));
  for (uint32_t i = 0; i <= mlir::fsdp::getMaxEnumValForStrategy(); ++i)
    EXPECT_EQ(
        mlir::fsdp::stringifyStrategy(static_cast<mlir::fsdp::Strategy>(i)),
        schedule::kStrategies[i]);
  ASSERT_EQ(mlir::fsdp::getMaxEnumValForGroup() + 1,
            std::size(schedule::kGroupNames));
  for (uint32_t i = 0; i <= mlir::fsdp::getMaxEnumValForGroup(); ++i)
    EXPECT_EQ(mlir::fsdp::stringifyGroup(static_cast<mlir::fsdp::Group>(i)),
              schedule::kGroupNames[i]);
  ASSERT_EQ(mlir::fsdp::getMaxEnumValForRole() + 1,
            std::size(schedule::kStateRoles));
  for (uint32_t i = 0; i <= mlir::fsdp::getMaxEnumValForRole(); ++i)
    EXPECT_EQ(mlir::fsdp::stringifyRole(static_cast<mlir::fsdp::Role>(i)),
              schedule::kStateRoles[i]);
  ASSERT_EQ(mlir::fsdp::getMaxEnumValForLayout() + 1,
            std::size(schedule::kLayouts));
  for (uint32_t i = 0; i <= mlir::fsdp::getMaxEnumValForLayout(); ++i)
    EXPECT_EQ(mlir::fsdp::stringifyLayout(static_cast<mlir::fsdp::Layout>(i)),
              schedule::kLayouts[i]);
  // The pass options' schedules and optimizers are the format's (the
  // schedule's spelling is also nn.lr_schedule's `kind`).
  ASSERT_EQ(mlir::fsdp::getMaxEnumValForLrSchedule() + 1,
            std::size(schedule::kLrSchedules));
  for (uint32_t i = 0; i <= mlir::fsdp::getMaxEnumValForLrSchedule(); ++i)
    EXPECT_EQ(
        mlir::fsdp::stringifyLrSchedule(static_cast<mlir::fsdp::LrSchedule>(i)),
        schedule::kLrSchedules[i].name);
  ASSERT_EQ(mlir::fsdp::getMaxEnumValForOptimizerKind() + 1,
            std::size(schedule::kOptimizers));
  for (uint32_t i = 0; i <= mlir::fsdp::getMaxEnumValForOptimizerKind(); ++i)
    EXPECT_TRUE(schedule::contains(
        schedule::kOptimizers, mlir::fsdp::stringifyOptimizerKind(
                                   static_cast<mlir::fsdp::OptimizerKind>(i))
                                   .str()));
  // The element types the translation writes are the format's dtypes.
  MLIRContext ctx;
  Builder b(&ctx);
  Type types[] = {b.getF32Type(), b.getF64Type(),  b.getI32Type(),
                  b.getI64Type(), b.getBF16Type(), b.getF16Type()};
  for (auto [t, d] : llvm::zip_equal(types, schedule::kDTypes))
    EXPECT_EQ(nn::dtypeName(t), d.name);
}
