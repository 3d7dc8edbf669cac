//===- DialectTest.cpp - facts the fsdp/nn dialects define once -----------===//
//
// The ODS defaults of the collectives' enum attributes are the schedule
// format's defaults (the runtime applies those to attributes a schedule
// leaves out); every strategy round-trips through its IR spelling; the one
// tensor-size definition refuses sizes it cannot hold.
//
//===----------------------------------------------------------------------===//
#include "fsdp/Dialect/FSDP/FSDP.h"
#include "fsdp/Dialect/NN/NN.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
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
