// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// Every nn op parses, verifies and prints back.

// CHECK-LABEL: func.func @all_ops
func.func @all_ops(%x: tensor<4x3xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
                   %w: tensor<5x3xf32> {nn.param = "l.weight", nn.init = "normal(0.02)"},
                   %b: tensor<5xf32> {nn.param = "l.bias", nn.init = "zeros", nn.trainable = false},
                   %step: tensor<i64> {nn.step}) -> (tensor<f32> {nn.loss}) {
  // CHECK: nn.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %h = nn.linear %x, %w, %b : (tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  // CHECK: nn.linear %{{.*}}, %{{.*}} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  %h0 = nn.linear %x, %w : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
  // CHECK: nn.matmul %{{.*}}, %{{.*}} {transpose_a = true} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
  %m = nn.matmul %h, %x {transpose_a = true} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
  %a = nn.add %h, %h0 : tensor<4x5xf32>
  %p = nn.mul %a, %h : tensor<4x5xf32>
  %r = nn.relu %p : tensor<4x5xf32>
  // CHECK: nn.gelu %{{.*}} {approximate = #nn.approximation<tanh>} : tensor<4x5xf32>
  %g = nn.gelu %r {approximate = #nn.approximation<tanh>} : tensor<4x5xf32>
  %rg = nn.relu_grad %p, %g : tensor<4x5xf32>
  // CHECK: nn.dropout %{{.*}}, %{{.*}} {micro_batch = 1 : i64, rate = 1.000000e-01 : f64, seed = 7 : i64} : tensor<4x5xf32>, tensor<i64>
  %dr = nn.dropout %rg, %step {rate = 0.1, seed = 7, micro_batch = 1} : tensor<4x5xf32>, tensor<i64>
  %gg = nn.gelu_grad %r, %rg : tensor<4x5xf32>
  // CHECK: nn.reduce_sum %{{.*}} {axes = array<i64: 0>} : tensor<4x5xf32> -> tensor<5xf32>
  %s = nn.reduce_sum %gg {axes = array<i64: 0>} : tensor<4x5xf32> -> tensor<5xf32>
  // CHECK: nn.broadcast %{{.*}}, %{{.*}} {axes = array<i64: 0>} : (tensor<5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %bc = nn.broadcast %s, %gg {axes = array<i64: 0>} : (tensor<5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32>
  %loss = nn.cross_entropy %bc, %y : (tensor<4x5xf32>, tensor<4xi32>) -> tensor<f32>
  %dl = nn.cross_entropy_grad %bc, %y, %loss : (tensor<4x5xf32>, tensor<4xi32>, tensor<f32>) -> tensor<4x5xf32>
  // CHECK: nn.sgd_update
  %ws = nn.sgd_update %w, %m {lr = 1.0e-01 : f64} : tensor<5x3xf32>
  // CHECK: nn.adamw_update
  %np, %nm, %nv = nn.adamw_update %w, %m, %m, %m, %step {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64} : tensor<5x3xf32>, tensor<i64>
  // CHECK: %[[LR:.*]] = nn.lr_schedule %{{.*}} {decay_steps = 100 : i64, kind = "cosine", lr = 1.000000e-03 : f64, min_lr = 1.000000e-05 : f64, warmup_steps = 10 : i64} : tensor<i64> -> tensor<f64>
  %lr = nn.lr_schedule %step {kind = "cosine", lr = 1.0e-03 : f64, warmup_steps = 10 : i64, decay_steps = 100 : i64, min_lr = 1.0e-05 : f64} : tensor<i64> -> tensor<f64>
  // CHECK: nn.lr_schedule %{{.*}} total(%{{.*}} : tensor<i64>) {decay_steps = 0 : i64, kind = "linear", lr = 1.000000e-03 : f64, min_lr = 0.000000e+00 : f64, warmup_steps = 0 : i64} : tensor<i64> -> tensor<f64>
  %lrt = nn.lr_schedule %step total(%step : tensor<i64>) {kind = "linear", lr = 1.0e-03 : f64, warmup_steps = 0 : i64, decay_steps = 0 : i64, min_lr = 0.0 : f64} : tensor<i64> -> tensor<f64>
  // CHECK: nn.sum_squares %{{.*}} : tensor<5x3xf32> -> tensor<1xf64>
  %ss = nn.sum_squares %m : tensor<5x3xf32> -> tensor<1xf64>
  // CHECK: nn.grad_norm %{{.*}} {max_norm = 1.000000e+00 : f64} : tensor<1xf64>
  %norm, %coef = nn.grad_norm %ss {max_norm = 1.0 : f64} : tensor<1xf64>
  // CHECK: nn.scale %{{.*}}, %{{.*}} : tensor<5x3xf32>, tensor<f64>
  %gs = nn.scale %m, %coef : tensor<5x3xf32>, tensor<f64>
  // CHECK: nn.adamw_update {{.*}} lr(%[[LR]] : tensor<f64>) {{{.*}}no_decay = array<i64: 0, 3>, sharded
  %sp, %sm, %sv = nn.adamw_update %w, %gs, %m, %m, %step lr(%lr : tensor<f64>) {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64, no_decay = array<i64: 0, 3>, sharded} : tensor<5x3xf32>, tensor<i64>
  // CHECK: nn.sgd_update {{.*}} lr(%[[LR]] : tensor<f64>)
  %sg = nn.sgd_update %w, %gs lr(%lr : tensor<f64>) {lr = 1.0e-01 : f64} : tensor<5x3xf32>
  // The loss-scaled norm and updates that skip on a non-finite norm.
  // CHECK: %[[SN:.*]], %{{.*}} = nn.grad_norm %{{.*}} loss_scale(%{{.*}} : tensor<f64>) : tensor<1xf64>
  %sn, %sc = nn.grad_norm %ss loss_scale(%lr : tensor<f64>) : tensor<1xf64>
  // CHECK: nn.adamw_update {{.*}} lr(%[[LR]] : tensor<f64>) skip_if_nonfinite(%[[SN]] : tensor<f64>) {
  %kp, %km, %kv = nn.adamw_update %w, %gs, %m, %m, %step lr(%lr : tensor<f64>) skip_if_nonfinite(%sn : tensor<f64>) {lr = 1.0e-03 : f64, beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.1 : f64} : tensor<5x3xf32>, tensor<i64>
  // CHECK: nn.sgd_update %{{.*}}, %{{.*}} skip_if_nonfinite(%[[SN]] : tensor<f64>) {
  %kg = nn.sgd_update %w, %gs skip_if_nonfinite(%sn : tensor<f64>) {lr = 1.0e-01 : f64} : tensor<5x3xf32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @transformer_ops
func.func @transformer_ops(%tok: tensor<2x4xi32> {nn.data = "tokens"}, %tgt: tensor<2x4xi32> {nn.data = "targets"},
                           %wte: tensor<16x8xf32> {nn.param = "wte"}, %wpe: tensor<6x8xf32> {nn.param = "wpe"},
                           %g: tensor<8xf32> {nn.param = "ln.weight"}, %b: tensor<8xf32> {nn.param = "ln.bias"},
                           %attn: tensor<8x16xf32> {nn.param = "c_attn.weight"}) -> (tensor<f32> {nn.loss}) {
  // CHECK: nn.embedding %{{.*}}, %{{.*}} : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %x = nn.embedding %tok, %wte : (tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %e = nn.embedding_grad %tok, %x {num_embeddings = 16 : i64} : (tensor<2x4xi32>, tensor<2x4x8xf32>) -> tensor<16x8xf32>
  %p = nn.position_embedding %x, %wpe : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x8xf32>
  %pg = nn.position_embedding_grad %p {num_positions = 6 : i64} : tensor<2x4x8xf32> -> tensor<6x8xf32>
  %ln = nn.layer_norm %p, %g, %b {eps = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %lx, %lw, %lb = nn.layer_norm_grad %p, %g, %ln {eps = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %rn = nn.rms_norm %ln, %g {eps = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %rx, %rw = nn.rms_norm_grad %ln, %g, %rn {eps = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  // CHECK: nn.linear %{{.*}}, %{{.*}} {transpose_weight = true} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %qkv = nn.linear %rn, %attn {transpose_weight = true} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  // CHECK: nn.split %{{.*}} {axis = 2 : i64, sizes = array<i64: 8, 4, 4>} : tensor<2x4x16xf32> -> tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>
  %q, %k, %v = nn.split %qkv {axis = 2 : i64, sizes = array<i64: 8, 4, 4>} : tensor<2x4x16xf32> -> tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>
  // CHECK: nn.rope %{{.*}} {head_dim = 4 : i64, theta = 1.000000e+04 : f64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %qr = nn.rope %q {head_dim = 4 : i64, theta = 10000.0 : f64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %kr = nn.rope %k {head_dim = 4 : i64, theta = 10000.0 : f64, inverse = true} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  // CHECK: nn.rope %{{.*}} {factor = 8.000000e+00 : f64, head_dim = 4 : i64, high_freq_factor = 8.000000e+00 : f64, original_max_position_embeddings = 128 : i64, rope_type = "llama3", theta = 1.000000e+04 : f64}
  %q3 = nn.rope %q {head_dim = 4 : i64, theta = 10000.0 : f64, rope_type = "llama3", factor = 8.0 : f64, high_freq_factor = 8.0 : f64, original_max_position_embeddings = 128 : i64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  // CHECK: nn.rope %{{.*}} {attention_factor = 1.200000e+00 : f64, beta_fast = 1.600000e+01 : f64, factor = 4.000000e+00 : f64, head_dim = 4 : i64, inverse = true, rope_type = "yarn", theta = 1.000000e+04 : f64, truncate = false}
  %qy = nn.rope %q {head_dim = 4 : i64, theta = 10000.0 : f64, inverse = true, rope_type = "yarn", factor = 4.0 : f64, beta_fast = 16.0 : f64, truncate = false, attention_factor = 1.2 : f64} : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  %a, %lse = nn.attention %qr, %kr, %v {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<2x2x4xf32>, tensor<2x4x8xf32>)
  %dq, %dk, %dv = nn.attention_grad %qr, %kr, %v, %a, %lse, %a {num_heads = 2 : i64, num_kv_heads = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<2x2x4xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  %s = nn.silu %a : tensor<2x4x8xf32>
  %sg = nn.silu_grad %a, %s : tensor<2x4x8xf32>
  // CHECK: nn.tp_copy %{{.*}} : tensor<2x4x8xf32>
  // CHECK: nn.tp_all_reduce %{{.*}} : tensor<2x4x8xf32>
  %tf = nn.tp_copy %sg : tensor<2x4x8xf32>
  %tg = nn.tp_all_reduce %tf : tensor<2x4x8xf32>
  // CHECK: nn.sp_split %{{.*}} {dim = 1 : i64, tp = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
  // CHECK: nn.sp_all_gather %{{.*}} {dim = 1 : i64, tp = 2 : i64} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
  // CHECK: nn.sp_reduce_scatter %{{.*}} {dim = 1 : i64, tp = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
  // CHECK: nn.sp_all_gather %{{.*}} {dim = 1 : i64, replicated_grad = true, tp = 2 : i64} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
  %ss = nn.sp_split %tg {dim = 1 : i64, tp = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
  %sa = nn.sp_all_gather %ss {dim = 1 : i64, tp = 2 : i64} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
  %sr = nn.sp_reduce_scatter %sa {dim = 1 : i64, tp = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x2x8xf32>
  %sh = nn.sp_all_gather %sr {dim = 1 : i64, replicated_grad = true, tp = 2 : i64} : tensor<2x2x8xf32> -> tensor<2x4x8xf32>
  %c = nn.concat %q, %k, %v {axis = -1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x16xf32>
  %z = nn.zeros_like %c : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %o = nn.linear %sg, %wte : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %l = nn.cross_entropy %o, %tgt : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
