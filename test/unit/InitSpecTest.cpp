//===- InitSpecTest.cpp - The parameter init specs of fsdp/InitSpec.h -----===//
//
// One parser for the compiler's nn.init verifier and fsdp-run. Before it, the
// two accepted different sets; the cases marked below are the ones where one
// side accepted what the other rejected.
//
//===----------------------------------------------------------------------===//
#include "fsdp/InitSpec.h"

#include <gtest/gtest.h>

using fsdp::init::Kind;
using fsdp::init::ParseError;
using fsdp::init::Spec;

namespace {

ParseError parse(const char *text, Spec &s) {
  return fsdp::init::parse(text, s);
}

TEST(InitSpec, Forms) {
  Spec s;
  EXPECT_EQ(parse("zeros", s), ParseError::None);
  EXPECT_EQ(s.kind, Kind::Zeros);
  EXPECT_EQ(parse("ones", s), ParseError::None);
  EXPECT_EQ(s.kind, Kind::Ones);
  EXPECT_EQ(parse("uniform(0.125)", s), ParseError::None);
  EXPECT_EQ(s.kind, Kind::Uniform);
  EXPECT_EQ(s.value, 0.125);
  EXPECT_EQ(parse("normal(0.02)", s), ParseError::None);
  EXPECT_EQ(s.kind, Kind::Normal);
  EXPECT_EQ(s.value, 0.02);
  EXPECT_EQ(parse("normal(0)", s), ParseError::None);
  EXPECT_EQ(s.value, 0.0);
  EXPECT_EQ(parse("uniform(1e-3)", s), ParseError::None);
  EXPECT_EQ(s.value, 1e-3);
}

// fsdp-run executed constant(v); the compiler's verifier rejected it.
TEST(InitSpec, ConstantUsedToBeRuntimeOnly) {
  Spec s;
  EXPECT_EQ(parse("constant(0.25)", s), ParseError::None);
  EXPECT_EQ(s.kind, Kind::Constant);
  EXPECT_EQ(s.value, 0.25);
  EXPECT_EQ(parse("constant(-1.5)", s), ParseError::None);
  EXPECT_EQ(s.value, -1.5);
}

// The compiler trimmed white space around the number; fsdp-run rejected it
// after the number.
TEST(InitSpec, SpaceInsideParenthesesUsedToBeCompilerOnly) {
  Spec s;
  EXPECT_EQ(parse("uniform(0.5 )", s), ParseError::None);
  EXPECT_EQ(s.value, 0.5);
  EXPECT_EQ(parse("normal( 0.02\t)", s), ParseError::None);
  EXPECT_EQ(s.value, 0.02);
}

// fsdp-run accepted a negative scale; the compiler's verifier did not.
TEST(InitSpec, NegativeScaleUsedToBeRuntimeOnly) {
  Spec s;
  EXPECT_EQ(parse("normal(-0.02)", s), ParseError::BadNumber);
  EXPECT_EQ(parse("uniform(-1)", s), ParseError::BadNumber);
}

// Both accepted infinite numbers (parameters of inf or NaN).
TEST(InitSpec, NonFiniteRejected) {
  Spec s;
  EXPECT_EQ(parse("normal(inf)", s), ParseError::BadNumber);
  EXPECT_EQ(parse("uniform(1e400)", s), ParseError::BadNumber);
  EXPECT_EQ(parse("constant(nan)", s), ParseError::BadNumber);
}

TEST(InitSpec, Malformed) {
  Spec s;
  EXPECT_EQ(parse("gaussian", s), ParseError::UnknownKind);
  EXPECT_EQ(parse("", s), ParseError::UnknownKind);
  EXPECT_EQ(parse(" zeros", s), ParseError::UnknownKind);
  EXPECT_EQ(parse("Zeros", s), ParseError::UnknownKind);
  EXPECT_EQ(parse("normal(0.02", s), ParseError::UnknownKind);
  EXPECT_EQ(parse("xavier(1)", s), ParseError::UnknownKind);
  EXPECT_EQ(parse("normal()", s), ParseError::BadNumber);
  EXPECT_EQ(parse("normal( )", s), ParseError::BadNumber);
  EXPECT_EQ(parse("normal(0.02x)", s), ParseError::BadNumber);
  EXPECT_EQ(parse("normal(1 2)", s), ParseError::BadNumber);
  EXPECT_FALSE(fsdp::init::isValid("uniform"));
  EXPECT_TRUE(fsdp::init::isValid("constant(0)"));
}

} // namespace
