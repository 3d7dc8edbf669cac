// RUN: fsdp-opt %s -split-input-file -verify-diagnostics
// fsdp.unit's inits are checked as nn.init is (fsdp/InitSpec.h).

// expected-error @+1 {{'fsdp.unit' op expects every init to be one of zeros, ones, uniform(a), normal(s), constant(v) (a, s >= 0; finite numbers), got "gaussian" for parameter "b"}}
fsdp.unit @l params ["a", "b"] {element_type = f32, inits = ["zeros", "gaussian"], shapes = [array<i64: 10>, array<i64: 2>], trainable = array<i1: true, true>}

// -----

fsdp.unit @ok params ["a", "b"] {element_type = f32, inits = ["constant(2)", "uniform(0.5 )"], shapes = [array<i64: 10>, array<i64: 2>], trainable = array<i1: true, true>}
