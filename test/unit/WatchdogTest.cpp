//===- WatchdogTest.cpp - How the watchdog names a stalled transfer -------===//
//
// A pipeline transfer's tag encodes its direction and micro-batch
// ((boundary value · m + micro-batch) · 2 + (1 for a gradient)); under
// interleaved 1F1B with v chunks that value is multiplied by v and the
// sending chunk / P added (runtime/docs/schedule-format.md, "Pipeline
// parallelism"; the tags the compiler writes for interleaved-1f1b
// pp-chunks=2, micro-batches=4). The expected names below are decoded by
// hand from those formulas, independently of the code.
//
//===----------------------------------------------------------------------===//
#include "fsdp/tooling/Watchdog.h"
#include "fsdp/schedule/Program.h"

#include <gtest/gtest.h>

#include <string>

using fsdp::schedule::Program;
using fsdp::tooling::describePipelineTransfer;

namespace {

/// Stage `stage` of 2 with one transfer `op` (fsdp.recv or fsdp.send) of
/// tag `tag` to or from the other stage; `extra` adds to the header.
Program oneTransfer(const std::string &op, int tag, int stage,
                    const std::string &extra) {
  std::string peer = std::to_string(1 - stage);
  std::string transfer =
      op == "fsdp.recv"
          ? R"({"op": "fsdp.recv", "operands": [], "results": [0],
               "attrs": {"async": true, "peer": )" +
                peer + R"(, "tag": )" + std::to_string(tag) +
                R"(}, "loc": "e.mlir:1:1"})"
          : R"({"op": "fsdp.send", "operands": [1], "results": [2],
               "attrs": {"async": true, "peer": )" +
                peer + R"(, "tag": )" + std::to_string(tag) +
                R"(}, "loc": "e.mlir:1:1"})";
  return Program::fromString(
      R"({"format": "fsdp-schedule", "version": 2, "world_size": 1,
          "pipeline": {"stages": 2, "stage": )" +
          std::to_string(stage) + R"(, "micro_batches": 4)" + extra + R"(},
          "units": [], "buffers": [
            {"id": 0, "dtype": "f32", "shape": [4]},
            {"id": 1, "dtype": "f32", "shape": [4]},
            {"id": 2, "dtype": "f32", "shape": [1]}],
          "inputs": [)" +
          (op == "fsdp.send" ? R"({"buffer": 1, "role": "features"})" : "") +
          R"(], "outputs": [], "instructions": [)" + transfer + "]}",
      0, "e.json");
}

TEST(Watchdog, NamesTheTransferOfATagUnder1F1B) {
  // v = 1: tag 1030 = 1024 (kPPBoundaryTagBase) + value 6; value 6 =
  // (0·4 + 3)·2 + 0, the activation of micro-batch 3.
  Program p = oneTransfer("fsdp.recv", 1030, 0, R"(, "schedule": "1f1b")");
  EXPECT_EQ(describePipelineTransfer(p, 0),
            "stage 0 is waiting for the activation of micro-batch 3 from "
            "stage 1 (e.json: instruction #0 'fsdp.recv' "
            "(e.mlir:1:1)): stage 1 is stopped, dead or running something "
            "else");
}

TEST(Watchdog, NamesTheTransferOfATagUnderInterleaved1F1B) {
  // v = 2: tag 1030 = 1024 + value 3 · 2 + chunk 0; value 3 =
  // (0·4 + 1)·2 + 1: the
  // gradient of micro-batch 1 (stage 0's recv at instruction #232 of
  // interleaved-1f1b pp=2 pp-chunks=2 micro-batches=4 on GPT-2).
  Program p = oneTransfer("fsdp.recv", 1030, 0,
                          R"(, "schedule": "interleaved-1f1b", "chunks": 2)");
  EXPECT_EQ(p.pipelineChunks(), 2);
  EXPECT_EQ(describePipelineTransfer(p, 0),
            "stage 0 is waiting for the gradient of micro-batch 1 from "
            "stage 1 (e.json: instruction #0 'fsdp.recv' "
            "(e.mlir:1:1)): stage 1 is stopped, dead or running something "
            "else");
  // tag 1057 = 1024 + value 16 · 2 + 1 (sent by the second chunk); value 16 =
  // (2·4 + 0)·2 + 0: the activation of micro-batch 0.
  Program q = oneTransfer("fsdp.send", 1057, 1,
                          R"(, "schedule": "interleaved-1f1b", "chunks": 2)");
  EXPECT_EQ(describePipelineTransfer(q, 0),
            "stage 1 is waiting for stage 0 to receive the activation of "
            "micro-batch 0 (e.json: instruction #0 'fsdp.send' "
            "(e.mlir:1:1)): stage 0 is stopped, dead or running something "
            "else");
}

TEST(Watchdog, NamesTheTiedWeightsExchange) {
  // Tags below 1024 (kPipelineBoundaryTagBase) are the tied weights'
  // gradient exchange (tied parameter tag - kPipelineTiedTagBase, by FQN),
  // sent once per step after the last micro-batch: stage 0's recv of GPT-2's
  // wte gradient was named "the activation of micro-batch 0".
  Program p = oneTransfer("fsdp.recv", 0, 0, R"(, "schedule": "1f1b")");
  EXPECT_EQ(describePipelineTransfer(p, 0),
            "stage 0 is waiting for the gradient of tied parameter 0 (by "
            "FQN; the tied weights' exchange after the last micro-batch) "
            "from stage 1 (e.json: instruction #0 'fsdp.recv' "
            "(e.mlir:1:1)): stage 1 is stopped, dead or running something "
            "else");
  // Under interleaving the tied tag is not multiplied by the chunks.
  Program q = oneTransfer("fsdp.send", 1, 1,
                          R"(, "schedule": "interleaved-1f1b", "chunks": 2)");
  EXPECT_EQ(describePipelineTransfer(q, 0),
            "stage 1 is waiting for stage 0 to receive the gradient of tied "
            "parameter 1 (by FQN; the tied weights' exchange after the last "
            "micro-batch) (e.json: instruction #0 'fsdp.send' "
            "(e.mlir:1:1)): stage 0 is stopped, dead or running something "
            "else");
}

} // namespace
