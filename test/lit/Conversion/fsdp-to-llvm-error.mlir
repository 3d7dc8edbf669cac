// An op without a lowering to the runtime's C API is an error at the op that
// names it (here an arith op on tensors inside the step), not a crash.
// RUN: fsdp-opt %s --convert-fsdp-to-llvm -verify-diagnostics -split-input-file

func.func @f(%x: tensor<4xf32> {nn.data = "features"}) -> (tensor<4xf32> {nn.loss}) {
  // expected-error @+1 {{'arith.addf' op has no lowering to the runtime's C API (--convert-fsdp-to-llvm)}}
  %y = arith.addf %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A step that the runtime's schedule rejects (here a loss without a role of
// the format) is reported, before anything is emitted.
func.func @g(%x: tensor<4xf32> {nn.data = "features"}) -> tensor<4xf32> {
  %y = nn.relu %x : tensor<4xf32>
  // expected-error @+1 {{result #0 has no role (nn.loss or fsdp.role)}}
  return %y : tensor<4xf32>
}
