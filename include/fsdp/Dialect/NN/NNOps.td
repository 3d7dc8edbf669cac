//===- NNOps.td - nn dialect operations -----------------------------------===//
//
// Every op declares its shape rule (ShapeInferenceOpInterface, checked by the
// verifier) and, where differentiable, its VJP (AutodiffOpInterface).
//
//===----------------------------------------------------------------------===//
#ifndef NN_OPS
#define NN_OPS

include "fsdp/Dialect/NN/NNDialect.td"
include "fsdp/Dialect/NN/NNInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/OpBase.td"

def NN_FloatTensor : RankedTensorOf<[F32, F64, BF16, F16]>;
def NN_IntTensor : RankedTensorOf<[I32]>;
def NN_StepTensor : 0DTensorOf<[I64]>;

class NN_ShapedOp<string mnemonic, list<Trait> traits = []> :
    NN_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<NN_ShapeInferenceOpInterface>,
        DeclareOpInterfaceMethods<NN_CostOpInterface>])> {
  let hasVerifier = 1;
}
class NN_DiffOp<string mnemonic, list<Trait> traits = []> :
    NN_ShapedOp<mnemonic, !listconcat(traits,
        [DeclareOpInterfaceMethods<NN_AutodiffOpInterface>])>;

def NN_LinearOp : NN_DiffOp<"linear"> {
  let summary = "y = x · weightᵀ + bias (torch.nn.Linear)";
  let description = [{
    `input` [..., in], `weight` [out, in], optional `bias` [out] →
    [..., out]. Leading dimensions of the input are batch dimensions.
    With `transpose_weight` the weight is stored [in, out] (GPT-2's Conv1D
    layout, as in its Hugging Face checkpoints). FLOPs: 2·rows·in·out.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       Optional<NN_FloatTensor>:$bias,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_weight);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def NN_MatmulOp : NN_DiffOp<"matmul"> {
  let summary = "2-D matrix product on flattened views";
  let description = [{
    Each operand is viewed as a matrix [rows, cols] with rows the product of
    all but its last dimension. c = op(a)·op(b), op = transpose when the
    flag is set. Without `transpose_a` the result keeps a's leading
    dimensions ([..., n]); with it the result is [m, n].
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_a,
                       DefaultValuedAttr<BoolAttr, "false">:$transpose_b);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

class NN_BinaryOp<string mnemonic> : NN_DiffOp<mnemonic, [SameOperandsAndResultType]> {
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}
def NN_AddOp : NN_BinaryOp<"add"> { let summary = "elementwise a + b (same shapes)"; }
def NN_MulOp : NN_BinaryOp<"mul"> { let summary = "elementwise a · b (same shapes)"; }

def NN_ReluOp : NN_DiffOp<"relu", [SameOperandsAndResultType]> {
  let summary = "max(x, 0)";
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def NN_GeluOp : NN_DiffOp<"gelu", [SameOperandsAndResultType]> {
  let summary = "GELU (Hendrycks & Gimpel 2016): exact erf form or tanh approximation";
  let arguments = (ins NN_FloatTensor:$input,
                       DefaultValuedAttr<StrAttr, "::fsdp::schedule::kDefaultGeluApproximation">:$approximate);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def NN_ReluGradOp : NN_ShapedOp<"relu_grad", [SameOperandsAndResultType]> {
  let summary = "dx = dy · [x > 0]";
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$grad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def NN_GeluGradOp : NN_ShapedOp<"gelu_grad", [SameOperandsAndResultType]> {
  let summary = "dx = gelu'(x) · dy";
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$grad,
                       DefaultValuedAttr<StrAttr, "::fsdp::schedule::kDefaultGeluApproximation">:$approximate);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def NN_ReduceSumOp : NN_DiffOp<"reduce_sum"> {
  let summary = "sum over the listed axes, which are dropped";
  let arguments = (ins NN_FloatTensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def NN_BroadcastOp : NN_DiffOp<"broadcast"> {
  let summary = "repeat the input along `axes` to the shape of `like`";
  let description = [{
    The result has the type of `like`; the input has that shape with the
    dimensions listed in `axes` removed. `like` only supplies the shape (it
    follows batch-size changes made by fsdp-shard).
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$like,
                       DenseI64ArrayAttr:$axes);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $like attr-dict `:` functional-type(operands, results)";
}

def NN_CrossEntropyOp : NN_DiffOp<"cross_entropy"> {
  let summary = "mean softmax cross-entropy with integer labels";
  let description = [{
    `logits` [..., C] (f32/f64), `labels` [...] i32 in [0, C) → scalar mean
    over all positions of −log softmax(logits)[label].
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IntTensor:$labels);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
}

def NN_CrossEntropyGradOp : NN_ShapedOp<"cross_entropy_grad"> {
  let summary = "dlogits = (softmax(logits) − onehot(labels)) · dloss / positions";
  let arguments = (ins NN_FloatTensor:$logits, NN_IntTensor:$labels,
                       NN_FloatTensor:$grad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)";
}

def NN_SgdUpdateOp : NN_ShapedOp<"sgd_update", [AllTypesMatch<["param", "grad", "result"]>]> {
  let summary = "p' = p − lr·(g + weight_decay·p)";
  let arguments = (ins NN_FloatTensor:$param, NN_FloatTensor:$grad,
                       F64Attr:$lr, DefaultValuedAttr<F64Attr, "::fsdp::schedule::kDefaultWeightDecay">:$weight_decay);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$param `,` $grad attr-dict `:` type($param)";
}

def NN_AdamWUpdateOp : NN_ShapedOp<"adamw_update", [AllTypesMatch<["param", "grad", "exp_avg",
    "exp_avg_sq", "new_param", "new_exp_avg", "new_exp_avg_sq"]>]> {
  let summary = "AdamW step with bias correction (Loshchilov & Hutter, ICLR 2019, Alg. 2)";
  let description = [{
    As torch.optim.AdamW: p ← p·(1 − lr·wd); m' = β1·m + (1−β1)·g;
    v' = β2·v + (1−β2)·g²; p' = p − lr·(m'/(1−β1ᵗ)) / (√(v'/(1−β2ᵗ)) + ε),
    t = `step` (1-based, i64 scalar). Elementwise, so it applies to a full
    parameter or to a flat shard alike.
  }];
  let arguments = (ins NN_FloatTensor:$param, NN_FloatTensor:$grad,
                       NN_FloatTensor:$exp_avg, NN_FloatTensor:$exp_avg_sq,
                       NN_StepTensor:$step,
                       F64Attr:$lr, F64Attr:$beta1, F64Attr:$beta2, F64Attr:$eps,
                       F64Attr:$weight_decay);
  let results = (outs NN_FloatTensor:$new_param, NN_FloatTensor:$new_exp_avg,
                      NN_FloatTensor:$new_exp_avg_sq);
  let assemblyFormat = [{
    $param `,` $grad `,` $exp_avg `,` $exp_avg_sq `,` $step attr-dict `:` type($param) `,` type($step)
  }];
}

//===----------------------------------------------------------------------===//
// Transformer ops
//===----------------------------------------------------------------------===//

def NN_EmbeddingOp : NN_DiffOp<"embedding"> {
  let summary = "gather rows of a table: out[..., :] = table[indices[...], :]";
  let description = [{
    `indices` [...] i32 in [0, V), `table` [V, C] → [..., C]. An index out
    of range is a runtime error. VJP: scatter-add (nn.embedding_grad).
  }];
  let arguments = (ins NN_IntTensor:$indices, NN_FloatTensor:$table);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$indices `,` $table attr-dict `:` functional-type(operands, results)";
}

def NN_EmbeddingGradOp : NN_ShapedOp<"embedding_grad"> {
  let summary = "scatter-add: dtable[v, :] = Σ_{i : indices[i] = v} grad[i, :]";
  let arguments = (ins NN_IntTensor:$indices, NN_FloatTensor:$grad, I64Attr:$num_embeddings);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$indices `,` $grad attr-dict `:` functional-type(operands, results)";
}

def NN_PositionEmbeddingOp : NN_DiffOp<"position_embedding"> {
  let summary = "add learned position embeddings: out[b, t, :] = x[b, t, :] + table[t, :]";
  let description = [{
    `input` [B, T, C], `table` [P, C] with P >= T → [B, T, C] (GPT-2's wpe).
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$table);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $table attr-dict `:` functional-type(operands, results)";
}

def NN_PositionEmbeddingGradOp : NN_ShapedOp<"position_embedding_grad"> {
  let summary = "dtable[t, :] = Σ_b grad[b, t, :] for t < T, zero for t >= T";
  let arguments = (ins NN_FloatTensor:$grad, I64Attr:$num_positions);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($result)";
}

def NN_LayerNormOp : NN_DiffOp<"layer_norm"> {
  let summary = "LayerNorm over the last dimension with affine weight and bias (Ba et al., 2016)";
  let description = [{
    y = (x − mean) / √(var + eps) · weight + bias; `input` [..., C],
    `weight`, `bias` [C]; var is the biased variance (as torch).
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight, NN_FloatTensor:$bias,
                       F64Attr:$eps);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)";
}

def NN_LayerNormGradOp : NN_ShapedOp<"layer_norm_grad"> {
  let summary = "VJP of layer_norm: (dx, dweight, dbias), statistics recomputed";
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight, NN_FloatTensor:$grad,
                       F64Attr:$eps);
  let results = (outs NN_FloatTensor:$grad_input, NN_FloatTensor:$grad_weight,
                      NN_FloatTensor:$grad_bias);
  let assemblyFormat = "$input `,` $weight `,` $grad attr-dict `:` functional-type(operands, results)";
}

def NN_RMSNormOp : NN_DiffOp<"rms_norm"> {
  let summary = "RMSNorm over the last dimension (Zhang & Sennrich, 2019), as LlamaRMSNorm";
  let description = [{ y = x / √(mean(x²) + eps) · weight; `input` [..., C], `weight` [C]. }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight, F64Attr:$eps);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` functional-type(operands, results)";
}

def NN_RMSNormGradOp : NN_ShapedOp<"rms_norm_grad"> {
  let summary = "VJP of rms_norm: (dx, dweight)";
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight, NN_FloatTensor:$grad,
                       F64Attr:$eps);
  let results = (outs NN_FloatTensor:$grad_input, NN_FloatTensor:$grad_weight);
  let assemblyFormat = "$input `,` $weight `,` $grad attr-dict `:` functional-type(operands, results)";
}

def NN_RopeOp : NN_DiffOp<"rope"> {
  let summary = "rotary position embedding, rotate-half layout (Su et al., 2021; HF Llama)";
  let description = [{
    `input` [B, T, H·D] (heads of `head_dim` D side by side). For head h,
    position t and i < D/2, with θ_i = t · theta^(−2i/D):
      y[i]       = x[i] cos θ_i − x[i + D/2] sin θ_i
      y[i + D/2] = x[i + D/2] cos θ_i + x[i] sin θ_i
    `inverse` rotates by −θ (the VJP, since the rotation is orthogonal).
  }];
  let arguments = (ins NN_FloatTensor:$input, I64Attr:$head_dim, F64Attr:$theta,
                       DefaultValuedAttr<BoolAttr, "false">:$inverse);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def NN_AttentionOp : NN_DiffOp<"attention"> {
  let summary = "causal scaled-dot-product attention with grouped-query heads";
  let description = [{
    `query` [B, T, Hq·D], `key`, `value` [B, T, Hkv·D]; query head h uses
    key/value head h / (Hq / Hkv) (Ainslie et al., GQA, 2023). For each
    head: softmax(q·kᵀ / √D + causal mask)·v (Vaswani et al., 2017, 3.2.1)
    → [B, T, Hq·D]. FLOPs: 4·B·T²·Hq·D (2 for q·kᵀ, 2 for p·v; the causal
    mask halves what a kernel must do).
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key, NN_FloatTensor:$value,
                       I64Attr:$num_heads, I64Attr:$num_kv_heads);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$query `,` $key `,` $value attr-dict `:` functional-type(operands, results)";
}

def NN_AttentionGradOp : NN_ShapedOp<"attention_grad"> {
  let summary = "VJP of attention: (dq, dk, dv), probabilities recomputed";
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key, NN_FloatTensor:$value,
                       NN_FloatTensor:$grad, I64Attr:$num_heads, I64Attr:$num_kv_heads);
  let results = (outs NN_FloatTensor:$grad_query, NN_FloatTensor:$grad_key,
                      NN_FloatTensor:$grad_value);
  let assemblyFormat = "$query `,` $key `,` $value `,` $grad attr-dict `:` functional-type(operands, results)";
}

def NN_SiluOp : NN_DiffOp<"silu", [SameOperandsAndResultType]> {
  let summary = "x · sigmoid(x) (SwiGLU's gate, Shazeer 2020)";
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def NN_SiluGradOp : NN_ShapedOp<"silu_grad", [SameOperandsAndResultType]> {
  let summary = "dx = dy · σ(x)(1 + x(1 − σ(x)))";
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$grad);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($result)";
}

def NN_SplitOp : NN_DiffOp<"split"> {
  let summary = "split along `axis` into pieces of `sizes` (GPT-2's fused q, k, v)";
  let arguments = (ins NN_FloatTensor:$input, I64Attr:$axis, DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<NN_FloatTensor>:$results);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($results)";
}

def NN_ConcatOp : NN_DiffOp<"concat"> {
  let summary = "concatenate along `axis`";
  let arguments = (ins Variadic<NN_FloatTensor>:$inputs, I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` functional-type($inputs, $result)";
}

def NN_ZerosLikeOp : NN_ShapedOp<"zeros_like"> {
  let summary = "a zero tensor of the shape of `like` (follows batch splits)";
  let arguments = (ins NN_FloatTensor:$like);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$like attr-dict `:` type($like) `->` type($result)";
}

def NN_CastOp : NN_DiffOp<"cast"> {
  let summary = "convert between float types, rounding to nearest even (mixed precision)";
  let description = [{
    Same shape, another float element type: f32 → bf16/f16 rounds to nearest
    even (IEEE 754-2019, 4.3.1); widening is exact. The VJP casts back.
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def NN_MicroBatchOp : NN_ShapedOp<"micro_batch"> {
  let summary = "micro-batch `index` of `count`: rows [index·m, (index+1)·m) of the batch";
  let description = [{
    `input` [b, ...] (any element type) → [b / count, ...] with m = b / count
    (gradient accumulation: each micro-batch is a contiguous block of this
    rank's batch). Data only: not differentiable.
  }];
  let arguments = (ins AnyRankedTensor:$input, I64Attr:$index, I64Attr:$count);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

#endif // NN_OPS
