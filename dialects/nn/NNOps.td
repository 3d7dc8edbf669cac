//===- NNOps.td - nn dialect operations -----------------------------------===//
//
// Every op declares its shape rule (ShapeInferenceOpInterface, checked by the
// verifier) and, where differentiable, its VJP (AutodiffOpInterface).
//
//===----------------------------------------------------------------------===//
#ifndef NN_OPS
#define NN_OPS

include "NNDialect.td"
include "NNInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/OpBase.td"

def NN_FloatTensor : RankedTensorOf<[F32, F64]>;
def NN_IntTensor : RankedTensorOf<[I32]>;
def NN_StepTensor : 0DTensorOf<[I64]>;

class NN_ShapedOp<string mnemonic, list<Trait> traits = []> :
    NN_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<NN_ShapeInferenceOpInterface>])> {
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
    FLOPs: 2·rows·in·out.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       Optional<NN_FloatTensor>:$bias);
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
                       DefaultValuedAttr<StrAttr, "\"none\"">:$approximate);
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
                       DefaultValuedAttr<StrAttr, "\"none\"">:$approximate);
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
                       F64Attr:$lr, DefaultValuedAttr<F64Attr, "0.0">:$weight_decay);
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

#endif // NN_OPS
