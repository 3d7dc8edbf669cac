// RUN: fsdp-opt %s -split-input-file -verify-diagnostics
// Every verifier message of the nn dialect.

func.func @linear_weight(%x: tensor<4x37xf32>, %w: tensor<37x10xf32>) -> tensor<4x10xf32> {
  // expected-error @+1 {{'nn.linear' op expects weight of shape [out=10, in=37], got [37, 10]}}
  %0 = nn.linear %x, %w : (tensor<4x37xf32>, tensor<37x10xf32>) -> tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// -----

func.func @linear_bias(%x: tensor<4x3xf32>, %w: tensor<5x3xf32>, %b: tensor<4xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'nn.linear' op expects bias of shape [out=5], got [4]}}
  %0 = nn.linear %x, %w, %b : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<4xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @linear_result(%x: tensor<4x3xf32>, %w: tensor<5x3xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'nn.linear' op expects result #0 of shape [4, 5], got [4, 6]}}
  %0 = nn.linear %x, %w : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

func.func @linear_dtype(%x: tensor<4x3xf32>, %w: tensor<5x3xf64>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'nn.linear' op expects input and weight of the same element type, got 'f32' and 'f64'}}
  %0 = nn.linear %x, %w : (tensor<4x3xf32>, tensor<5x3xf64>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @linear_int(%x: tensor<4x3xi32>, %w: tensor<5x3xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'nn.linear' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or bfloat16 type or 16-bit float values}}
  %0 = nn.linear %x, %w : (tensor<4x3xi32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @linear_scalar(%x: tensor<f32>, %w: tensor<5x3xf32>) -> tensor<5xf32> {
  // expected-error @+1 {{'nn.linear' op expects an input of rank >= 1, got a scalar}}
  %0 = nn.linear %x, %w : (tensor<f32>, tensor<5x3xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----

func.func @dynamic(%x: tensor<?x3xf32>, %w: tensor<5x3xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'nn.linear' op expects statically shaped operands, operand #0 has type 'tensor<?x3xf32>'}}
  %0 = nn.linear %x, %w : (tensor<?x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @matmul(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'nn.matmul' op expects contracting dimensions to match, got op(lhs) of shape [4, 3] and op(rhs) of shape [4, 3]}}
  %0 = nn.matmul %a, %b : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @add(%a: tensor<4x3xf32>, %b: tensor<3x4xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'nn.add' op requires the same type for all operands and results}}
  %0 = "nn.add"(%a, %b) : (tensor<4x3xf32>, tensor<3x4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @gelu(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+2 {{expected ::mlir::nn::GeluApproximation to be one of: none, tanh}}
  // expected-error @+1 {{failed to parse NN_GeluApproximationAttr parameter 'value'}}
  %0 = nn.gelu %a {approximate = #nn.approximation<fast>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reduce_axes(%a: tensor<4x3xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.reduce_sum' op expects axes in [0, 2), got 2}}
  %0 = nn.reduce_sum %a {axes = array<i64: 2>} : tensor<4x3xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @reduce_order(%a: tensor<4x3xf32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.reduce_sum' op expects strictly increasing axes, got [1, 0]}}
  %0 = nn.reduce_sum %a {axes = array<i64: 1, 0>} : tensor<4x3xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @broadcast(%a: tensor<4xf32>, %like: tensor<4x3xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{'nn.broadcast' op expects input of shape [3] (the shape of 'like' without axes [0]), got [4]}}
  %0 = nn.broadcast %a, %like {axes = array<i64: 0>} : (tensor<4xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

func.func @ce_labels(%l: tensor<4x10xf32>, %y: tensor<5xi32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.cross_entropy' op expects labels of shape [4] (logits without the class dimension), got [5]}}
  %0 = nn.cross_entropy %l, %y : (tensor<4x10xf32>, tensor<5xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @ce_label_type(%l: tensor<4x10xf32>, %y: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'nn.cross_entropy' op operand #1 must be ranked tensor of 32-bit signless integer values}}
  %0 = nn.cross_entropy %l, %y : (tensor<4x10xf32>, tensor<4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @ce_result(%l: tensor<4x10xf32>, %y: tensor<4xi32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.cross_entropy' op expects result #0 of shape [], got [4]}}
  %0 = nn.cross_entropy %l, %y : (tensor<4x10xf32>, tensor<4xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @ce_grad(%l: tensor<4x10xf32>, %y: tensor<4xi32>, %g: tensor<4xf32>) -> tensor<4x10xf32> {
  // expected-error @+1 {{'nn.cross_entropy_grad' op expects a scalar gradient of the loss's element type (the logits', f32 for bf16/f16 logits) 'f32', got 'tensor<4xf32>'}}
  %0 = nn.cross_entropy_grad %l, %y, %g : (tensor<4x10xf32>, tensor<4xi32>, tensor<4xf32>) -> tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// -----

// The loss of bf16 logits is f32 (torch.autocast's cross_entropy).
func.func @ce_bf16_loss(%l: tensor<4x10xbf16>, %y: tensor<4xi32>) -> tensor<bf16> {
  // expected-error @+1 {{'nn.cross_entropy' op expects result #0 of element type 'f32', got 'bf16'}}
  %0 = nn.cross_entropy %l, %y : (tensor<4x10xbf16>, tensor<4xi32>) -> tensor<bf16>
  return %0 : tensor<bf16>
}

// -----

func.func @ce_grad_f16_seed(%l: tensor<4x10xf16>, %y: tensor<4xi32>, %g: tensor<f16>) -> tensor<4x10xf16> {
  // expected-error @+1 {{'nn.cross_entropy_grad' op expects a scalar gradient of the loss's element type (the logits', f32 for bf16/f16 logits) 'f32', got 'tensor<f16>'}}
  %0 = nn.cross_entropy_grad %l, %y, %g : (tensor<4x10xf16>, tensor<4xi32>, tensor<f16>) -> tensor<4x10xf16>
  return %0 : tensor<4x10xf16>
}

// -----

func.func @sgd(%p: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.sgd_update' op expects lr > 0}}
  %0 = nn.sgd_update %p, %p {lr = 0.0 : f64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @adamw(%p: tensor<4xf32>, %s: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.adamw_update' op expects betas in [0, 1), got (1.000000e+00, 9.990000e-01)}}
  %a, %b, %c = nn.adamw_update %p, %p, %p, %p, %s {lr = 1.0e-03 : f64, beta1 = 1.0 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<i64>
  return %a : tensor<4xf32>
}

// -----

func.func @adamw_eps(%p: tensor<4xf32>, %s: tensor<i64>) -> tensor<4xf32> {
  // expected-error @+1 {{'nn.adamw_update' op expects eps > 0}}
  %a, %b, %c = nn.adamw_update %p, %p, %p, %p, %s {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 0.0 : f64, weight_decay = 0.0 : f64} : tensor<4xf32>, tensor<i64>
  return %a : tensor<4xf32>
}

// -----

// expected-error @+1 {{'nn.init' on argument of type 'tensor<4xf32>' must be one of "zeros", "ones", "uniform(a)", "normal(std)" with a non-negative number, got "gaussian"}}
func.func @bad_init(%w: tensor<4xf32> {nn.param = "w", nn.init = "gaussian"}) {
  return
}

// -----

// expected-error @+1 {{'nn.param' on argument of type 'tensor<4xi32>' expects a statically shaped float tensor parameter}}
func.func @int_param(%w: tensor<4xi32> {nn.param = "w"}) {
  return
}

// -----

// expected-error @+1 {{'nn.param' on argument of type 'tensor<4xf32>' must be a non-empty string (a fully qualified parameter name)}}
func.func @empty_fqn(%w: tensor<4xf32> {nn.param = ""}) {
  return
}

// -----

// expected-error @+1 {{'nn.data' on argument of type 'tensor<4xf32>' must be "features", "labels", "tokens" or "targets", got "images"}}
func.func @bad_role(%x: tensor<4xf32> {nn.data = "images"}) {
  return
}

// -----

// expected-error @+1 {{'nn.step' on argument of type 'tensor<f32>' expects tensor<i64>}}
func.func @bad_step(%s: tensor<f32> {nn.step}) {
  return
}

// -----

// expected-error @+1 {{'nn.loss_scale' on argument of type 'tensor<f32>' expects a tensor<f64> argument}}
func.func @bad_loss_scale(%s: tensor<f32> {nn.loss_scale}) {
  return
}

// -----

// expected-error @+1 {{unknown nn attribute 'nn.weight'}}
func.func @unknown_attr(%w: tensor<4xf32> {nn.weight = "w"}) {
  return
}

// -----

func.func @unknown_op(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{custom op 'nn.softplus' is unknown}}
  %0 = nn.softplus %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @conv1d(%x: tensor<4x3xf32>, %w: tensor<5x3xf32>) -> tensor<4x5xf32> {
  // expected-error @+1 {{'nn.linear' op expects weight of shape [in=3, out=5] (transpose_weight), got [5, 3]}}
  %0 = nn.linear %x, %w {transpose_weight = true} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

func.func @embedding(%t: tensor<2x4xi32>, %w: tensor<16xf32>) -> tensor<2x4x16xf32> {
  // expected-error @+1 {{'nn.embedding' op expects a table of shape [num_embeddings, dim], got [16]}}
  %0 = nn.embedding %t, %w : (tensor<2x4xi32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  return %0 : tensor<2x4x16xf32>
}

// -----

func.func @embedding_grad(%t: tensor<2x4xi32>, %g: tensor<2x5x8xf32>) -> tensor<16x8xf32> {
  // expected-error @+1 {{'nn.embedding_grad' op expects grad of shape [2, 4] + [dim], got [2, 5, 8]}}
  %0 = nn.embedding_grad %t, %g {num_embeddings = 16 : i64} : (tensor<2x4xi32>, tensor<2x5x8xf32>) -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// -----

func.func @positions(%x: tensor<2x8x4xf32>, %w: tensor<6x4xf32>) -> tensor<2x8x4xf32> {
  // expected-error @+1 {{'nn.position_embedding' op expects a table of shape [positions >= 8, dim=4], got [6, 4]}}
  %0 = nn.position_embedding %x, %w : (tensor<2x8x4xf32>, tensor<6x4xf32>) -> tensor<2x8x4xf32>
  return %0 : tensor<2x8x4xf32>
}

// -----

func.func @layer_norm(%x: tensor<2x8xf32>, %g: tensor<4xf32>, %b: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'nn.layer_norm' op expects weight and bias of shape [8], got [4]}}
  %0 = nn.layer_norm %x, %g, %b {eps = 1.0e-05 : f64} : (tensor<2x8xf32>, tensor<4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @rms_eps(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'nn.rms_norm' op expects eps > 0}}
  %0 = nn.rms_norm %x, %g {eps = 0.0 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @rope(%x: tensor<2x4x12xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'nn.rope' op expects an even head_dim that divides the last dimension 12, got 5}}
  %0 = nn.rope %x {head_dim = 5 : i64, theta = 10000.0 : f64} : tensor<2x4x12xf32> -> tensor<2x4x12xf32>
  return %0 : tensor<2x4x12xf32>
}

// -----

func.func @rope_type(%x: tensor<2x4x12xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'nn.rope' op unknown rope_type "dynamic" (supported: default, linear, llama3, yarn)}}
  %0 = nn.rope %x {head_dim = 4 : i64, theta = 10000.0 : f64, rope_type = "dynamic"} : tensor<2x4x12xf32> -> tensor<2x4x12xf32>
  return %0 : tensor<2x4x12xf32>
}

// -----

func.func @rope_llama3_bands(%x: tensor<2x4x12xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'nn.rope' op expects 0 < low_freq_factor < high_freq_factor, got 4.000000e+00 and 4.000000e+00}}
  %0 = nn.rope %x {head_dim = 4 : i64, theta = 10000.0 : f64, rope_type = "llama3", factor = 8.0 : f64, low_freq_factor = 4.0 : f64} : tensor<2x4x12xf32> -> tensor<2x4x12xf32>
  return %0 : tensor<2x4x12xf32>
}

// -----

func.func @rope_factor(%x: tensor<2x4x12xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'nn.rope' op expects factor > 0 and attention_factor > 0}}
  %0 = nn.rope %x {head_dim = 4 : i64, theta = 10000.0 : f64, rope_type = "linear", factor = 0.0 : f64} : tensor<2x4x12xf32> -> tensor<2x4x12xf32>
  return %0 : tensor<2x4x12xf32>
}

// -----

func.func @rope_foreign_parameter(%x: tensor<2x4x12xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'nn.rope' op 'attention_factor' is not a parameter of rope_type "llama3"}}
  %0 = nn.rope %x {head_dim = 4 : i64, theta = 10000.0 : f64, rope_type = "llama3", factor = 8.0 : f64, attention_factor = 1.2 : f64} : tensor<2x4x12xf32> -> tensor<2x4x12xf32>
  return %0 : tensor<2x4x12xf32>
}

// -----

func.func @rope_unscaled_factor(%x: tensor<2x4x12xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'nn.rope' op 'factor' is not a parameter of rope_type "default"}}
  %0 = nn.rope %x {head_dim = 4 : i64, theta = 10000.0 : f64, factor = 2.0 : f64} : tensor<2x4x12xf32> -> tensor<2x4x12xf32>
  return %0 : tensor<2x4x12xf32>
}

// -----

func.func @gqa(%q: tensor<2x4x12xf32>, %k: tensor<2x4x8xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'nn.attention' op expects num_heads (3) to be a positive multiple of num_kv_heads (2)}}
  %0:2 = nn.attention %q, %k, %k {num_heads = 3 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x12xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x12xf32>, tensor<2x3x4xf32>)
  return %0#0 : tensor<2x4x12xf32>
}

// -----

func.func @kv_shape(%q: tensor<2x4x12xf32>, %k: tensor<2x4x8xf32>) -> tensor<2x4x12xf32> {
  // expected-error @+1 {{'nn.attention' op expects key of shape [2, 4, 6], got [2, 4, 8]}}
  %0:2 = nn.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x12xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x12xf32>, tensor<2x3x4xf32>)
  return %0#0 : tensor<2x4x12xf32>
}

// -----

func.func @attention_stats_type(%q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'nn.attention' op expects result #1 of shape [2, 2, 4], got [2, 4, 2]}}
  %0:2 = nn.attention %q, %k, %k {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x2xf32>)
  return %0#0 : tensor<2x4x8xf32>
}

// -----

func.func @attention_grad_stats(%q: tensor<2x4x8xf64>, %k: tensor<2x4x4xf64>, %l: tensor<2x2x4xf32>) -> tensor<2x4x8xf64> {
  // expected-error @+1 {{'nn.attention_grad' op expects logsumexp of type 'tensor<2x2x4xf64>', got 'tensor<2x2x4xf32>'}}
  %0:3 = nn.attention_grad %q, %k, %k, %q, %l, %q {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf64>, tensor<2x4x4xf64>, tensor<2x4x4xf64>, tensor<2x4x8xf64>, tensor<2x2x4xf32>, tensor<2x4x8xf64>) -> (tensor<2x4x8xf64>, tensor<2x4x4xf64>, tensor<2x4x4xf64>)
  return %0#0 : tensor<2x4x8xf64>
}

// -----

func.func @attention_grad_out(%q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %l: tensor<2x2x4xf32>) -> tensor<2x4x8xf32> {
  // expected-error @+1 {{'nn.attention_grad' op expects out of shape [2, 4, 8], got [2, 4, 4]}}
  %0:3 = nn.attention_grad %q, %k, %k, %k, %l, %q {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x2x4xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  return %0#0 : tensor<2x4x8xf32>
}

// -----

func.func @split(%x: tensor<2x9xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'nn.split' op expects positive sizes [4, 4] that add up to dimension 1 (9)}}
  %a, %b = nn.split %x {axis = 1 : i64, sizes = array<i64: 4, 4>} : tensor<2x9xf32> -> tensor<2x4xf32>, tensor<2x4xf32>
  return %a : tensor<2x4xf32>
}

// -----

func.func @split_results(%x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'nn.split' op expects one result per size (2), got 3}}
  %a, %b, %c = nn.split %x {axis = 1 : i64, sizes = array<i64: 4, 4>} : tensor<2x8xf32> -> tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
  return %a : tensor<2x4xf32>
}

// -----

func.func @cast_shape(%x: tensor<2x8xf32>) -> tensor<2x4xbf16> {
  // expected-error @+1 {{'nn.cast' op expects result #0 of shape [2, 8], got [2, 4]}}
  %0 = nn.cast %x : tensor<2x8xf32> -> tensor<2x4xbf16>
  return %0 : tensor<2x4xbf16>
}

// -----

func.func @concat(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'nn.concat' op expects inputs that differ only in dimension 1}}
  %0 = nn.concat %a, %b {axis = 1 : i64} : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

// A parameter whose size does not fit: a diagnostic at the tensor (it used to
// be planned with "bytes": -9223372036854775808 and pass any memory budget).
func.func @huge(
    // expected-error @+1 {{'nn.param' on 'tensor<2147483648x2147483648xf32>': the tensor's size exceeds 2^59 bytes}}
    %w: tensor<2147483648x2147483648xf32> {nn.param = "w"}) -> tensor<2147483648x2147483648xf32> {
  return %w : tensor<2147483648x2147483648xf32>
}

// -----

func.func @lr_schedule_kind(%s: tensor<i64>) -> tensor<f64> {
  // expected-error @+1 {{'nn.lr_schedule' op expects kind constant, linear or cosine, got 'step'}}
  %lr = nn.lr_schedule %s {kind = "step", lr = 1.0e-03 : f64, warmup_steps = 0 : i64, decay_steps = 10 : i64, min_lr = 0.0 : f64} : tensor<i64> -> tensor<f64>
  return %lr : tensor<f64>
}

// -----

func.func @lr_schedule_warmup(%s: tensor<i64>) -> tensor<f64> {
  // expected-error @+1 {{'nn.lr_schedule' op expects warmup_steps >= 0, got -3}}
  %lr = nn.lr_schedule %s {kind = "linear", lr = 1.0e-03 : f64, warmup_steps = -3 : i64, decay_steps = 10 : i64, min_lr = 0.0 : f64} : tensor<i64> -> tensor<f64>
  return %lr : tensor<f64>
}

// -----

func.func @lr_schedule_decay(%s: tensor<i64>) -> tensor<f64> {
  // expected-error @+1 {{'nn.lr_schedule' op expects decay_steps >= 1 for kind 'cosine' (or a total_steps operand), got 0}}
  %lr = nn.lr_schedule %s {kind = "cosine", lr = 1.0e-03 : f64, warmup_steps = 0 : i64, decay_steps = 0 : i64, min_lr = 0.0 : f64} : tensor<i64> -> tensor<f64>
  return %lr : tensor<f64>
}

// -----

func.func @lr_schedule_total_and_decay(%s: tensor<i64>, %t: tensor<i64>) -> tensor<f64> {
  // expected-error @+1 {{'nn.lr_schedule' op expects a total_steps operand only for kind linear or cosine with decay_steps 0, got kind 'cosine' and decay_steps 10}}
  %lr = nn.lr_schedule %s total(%t : tensor<i64>) {kind = "cosine", lr = 1.0e-03 : f64, warmup_steps = 0 : i64, decay_steps = 10 : i64, min_lr = 0.0 : f64} : tensor<i64> -> tensor<f64>
  return %lr : tensor<f64>
}

// -----

func.func @lr_schedule_total_constant(%s: tensor<i64>, %t: tensor<i64>) -> tensor<f64> {
  // expected-error @+1 {{'nn.lr_schedule' op expects a total_steps operand only for kind linear or cosine with decay_steps 0, got kind 'constant' and decay_steps 0}}
  %lr = nn.lr_schedule %s total(%t : tensor<i64>) {kind = "constant", lr = 1.0e-03 : f64, warmup_steps = 2 : i64, decay_steps = 0 : i64, min_lr = 0.0 : f64} : tensor<i64> -> tensor<f64>
  return %lr : tensor<f64>
}

// -----

// expected-error @+1 {{'nn.total_steps' on argument of type 'tensor<f64>' expects tensor<i64>}}
func.func @total_steps_type(%s: tensor<i64> {nn.step}, %t: tensor<f64> {nn.total_steps}) {
  return
}

// -----

func.func @lr_schedule_min(%s: tensor<i64>) -> tensor<f64> {
  // expected-error @+1 {{'nn.lr_schedule' op expects min_lr in [0, lr], got 1.000000e-02}}
  %lr = nn.lr_schedule %s {kind = "linear", lr = 1.0e-03 : f64, warmup_steps = 0 : i64, decay_steps = 5 : i64, min_lr = 1.0e-02 : f64} : tensor<i64> -> tensor<f64>
  return %lr : tensor<f64>
}

// -----

func.func @grad_norm_max(%ss: tensor<1xf64>) -> tensor<f64> {
  // expected-error @+1 {{'nn.grad_norm' op expects max_norm > 0, got 0.000000e+00}}
  %n, %c = nn.grad_norm %ss {max_norm = 0.0 : f64} : tensor<1xf64>
  return %n : tensor<f64>
}

// -----

func.func @no_decay_ranges(%p: tensor<8xf32>, %s: tensor<i64>) -> tensor<8xf32> {
  // expected-error @+1 {{'nn.adamw_update' op expects no_decay ranges ascending, non-empty and disjoint, got [4, 3)}}
  %a, %b, %c = nn.adamw_update %p, %p, %p, %p, %s {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64, no_decay = array<i64: 0, 2, 4, 3>} : tensor<8xf32>, tensor<i64>
  return %a : tensor<8xf32>
}

// -----

func.func @no_decay_pairs(%p: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'nn.sgd_update' op expects no_decay as [begin, end) pairs, got 3 values}}
  %a = nn.sgd_update %p, %p {lr = 1.0e-01 : f64, weight_decay = 0.1 : f64, no_decay = array<i64: 0, 2, 4>} : tensor<8xf32>
  return %a : tensor<8xf32>
}

// -----

func.func @scale_type(%g: tensor<8xf32>, %c: tensor<f64>) -> tensor<8xf64> {
  // expected-error @+1 {{'nn.scale' op}}
  %y = "nn.scale"(%g, %c) : (tensor<8xf32>, tensor<f64>) -> tensor<8xf64>
  return %y : tensor<8xf64>
}

// -----

func.func @dropout_rate(%x: tensor<4x8xf32>, %s: tensor<i64>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'nn.dropout' op attribute 'rate' failed to satisfy constraint: a 64-bit float dropout rate in [0, 1)}}
  %y = nn.dropout %x, %s {rate = 1.0, seed = 0} : tensor<4x8xf32>, tensor<i64>
  return %y : tensor<4x8xf32>
}

// -----

func.func @dropout_type(%x: tensor<4x8xf32>, %s: tensor<i64>) -> tensor<4x8xf64> {
  // expected-error @+1 {{'nn.dropout' op failed to verify that all of {input, result} have same type}}
  %y = "nn.dropout"(%x, %s) {rate = 0.5 : f64, seed = 0 : i64} : (tensor<4x8xf32>, tensor<i64>) -> tensor<4x8xf64>
  return %y : tensor<4x8xf64>
}

// -----

func.func @dropout_scalar(%x: tensor<f32>, %s: tensor<i64>) -> tensor<f32> {
  // expected-error @+1 {{'nn.dropout' op operand #0 must be 1D/2D/3D/4D tensor of}}
  %y = "nn.dropout"(%x, %s) {rate = 0.5 : f64, seed = 0 : i64} : (tensor<f32>, tensor<i64>) -> tensor<f32>
  return %y : tensor<f32>
}

// -----

func.func @tp_all_reduce_type(%x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'nn.tp_all_reduce' op requires the same type for all operands and results}}
  %y = "nn.tp_all_reduce"(%x) : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

func.func @tp_copy_int(%x: tensor<4x8xi32>) -> tensor<4x8xi32> {
  // expected-error @+1 {{'nn.tp_copy' op operand #0 must be ranked tensor of 32-bit float or 64-bit float or bfloat16 type or 16-bit float values}}
  %y = "nn.tp_copy"(%x) : (tensor<4x8xi32>) -> tensor<4x8xi32>
  return %y : tensor<4x8xi32>
}

// -----

func.func @sp_split_indivisible(%x: tensor<2x5x8xf32>) -> tensor<2x2x8xf32> {
  // expected-error @+1 {{'nn.sp_split' op expects dimension 1 (5) divisible by tp (2)}}
  %y = nn.sp_split %x {dim = 1 : i64, tp = 2 : i64} : tensor<2x5x8xf32> -> tensor<2x2x8xf32>
  return %y : tensor<2x2x8xf32>
}

// -----

func.func @sp_reduce_scatter_dim(%x: tensor<2x4x8xf32>) -> tensor<2x2x8xf32> {
  // expected-error @+1 {{'nn.sp_reduce_scatter' op expects dim 3 below the input's rank 3}}
  %y = nn.sp_reduce_scatter %x {dim = 3 : i64, tp = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
  return %y : tensor<2x2x8xf32>
}

// -----

func.func @sp_all_gather_type(%x: tensor<2x2x8xf32>) -> tensor<2x2x8xf32> {
  // expected-error @+1 {{'nn.sp_all_gather' op expects result #0 of shape [2, 4, 8], got [2, 2, 8]}}
  %y = nn.sp_all_gather %x {dim = 1 : i64, tp = 2 : i64} : tensor<2x2x8xf32> -> tensor<2x2x8xf32>
  return %y : tensor<2x2x8xf32>
}

// -----

func.func @sp_all_gather_tp(%x: tensor<2x2x8xf32>) -> tensor<2x2x8xf32> {
  // expected-error @+1 {{'nn.sp_all_gather' op attribute 'tp' failed to satisfy constraint: 64-bit signless integer attribute whose minimum value is 1}}
  %y = nn.sp_all_gather %x {dim = 1 : i64, tp = 0 : i64} : tensor<2x2x8xf32> -> tensor<2x2x8xf32>
  return %y : tensor<2x2x8xf32>
}
