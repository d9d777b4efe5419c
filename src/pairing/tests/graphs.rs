//! Hand-built capture pairs that more than one test reads: an end-to-end test pairs the whole
//! graph, and the unit test of the pass that settles it runs that pass alone on the same
//! graph (`run_alone`), so the two cannot drift apart. Each returns the TorchScript and ONNX
//! captures and the ids the tests look at.

use super::Builder;
use crate::capture::store::Stored;
use crate::capture::{Capture, Side};

/// Gives value `id` of `c` another shape of the same element count (the builder makes every
/// value 1-D).
pub(in crate::pairing) fn reshape(c: &mut Capture, id: usize, shape: &[usize]) {
    let v = &mut c.values[id];
    v.shape = shape.to_vec();
    if let Some(Stored::Memory(t)) = &mut v.tensor {
        t.shape = shape.to_vec();
    }
}

/// Query and key projections of one input, subtracted; on the ONNX side (no scopes) the two
/// Gemms come in the order given, with the values given. Ids: torch q, torch k, onnx q, onnx k.
pub(in crate::pairing) fn sibling_projections(
    onnx_q: &[f32],
    key_first: bool,
) -> (Capture, Capture, [usize; 4]) {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let q = t.op("aten::linear", "attn.q", &[ti], &[1.0, 2.0]);
    let k = t.op("aten::linear", "attn.k", &[ti], &[3.0, 4.0]);
    let s = t.op("aten::sub", "attn", &[q, k], &[-2.0, -2.0]);
    t.output(0, s);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let (oq, ok) = if key_first {
        let ok = o.op("Gemm", "", &[oi], &[3.0, 4.0]);
        (o.op("Gemm", "", &[oi], onnx_q), ok)
    } else {
        let oq = o.op("Gemm", "", &[oi], onnx_q);
        (oq, o.op("Gemm", "", &[oi], &[3.0, 4.0]))
    };
    let diff: Vec<f32> = onnx_q.iter().zip([3.0, 4.0]).map(|(a, b)| a - b).collect();
    let os = o.op("Sub", "", &[oq, ok], &diff);
    o.output(0, os);
    (t.build(), o.build(), [q, k, oq, ok])
}

/// onnxsim drops the `* 0.5` that ends a GELU's decomposition and halves the next node's
/// weights (`onnx_reader`: a Conv can absorb it, a Relu cannot): the GELU's last ONNX value
/// is twice PyTorch's while both graphs are right. Ids: torch fc1, gelu, fc2; onnx the same.
pub(in crate::pairing) fn gelu_scale_folded(onnx_reader: &str) -> (Capture, Capture, [usize; 6]) {
    let x = [1.0, -2.0, 3.0, -4.0];
    let fc1 = [0.5, -1.0, 1.5, -2.0];
    let gelu = [0.3457, -0.1587, 1.3996, -0.0455];
    let fc2 = [0.25, 0.5, -0.75, 1.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let t1 = t.op("aten::_convolution", "m.fc1", &[ti], &fc1);
    let tg = t.op("aten::gelu", "m.act", &[t1], &gelu);
    let t2 = t.op("aten::_convolution", "m.fc2", &[tg], &fc2);
    t.output(0, t2);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let o1 = o.op("Conv", "m.fc1", &[oi], &fc1);
    let og = o.op("Mul", "m.act", &[o1], &gelu.map(|v| 2.0 * v));
    let o2 = o.op(onnx_reader, "m.fc2", &[og], &fc2);
    o.output(0, o2);
    (t.build(), o.build(), [t1, tg, t2, o1, og, o2])
}

/// A query projection whose ONNX Linear also applies `sqrt(1/sqrt(d))` of the attention it
/// feeds (onnxslim folds the query's half of the attention's scale into its weights), or a
/// fault that scales it by `factor`. Ids: torch q, k, v, attention; onnx the same.
pub(in crate::pairing) fn attention_scale_folded(factor: f32) -> (Capture, Capture, [usize; 8]) {
    let (q, k, v) = (
        [1.0, -2.0, 3.0, 0.5],
        [0.25, 1.5, -1.0, 2.0],
        [3.0, 1.0, -2.0, 4.0],
    );
    let z = [0.75, -0.5, 2.5, 1.25];
    let scaled = |x: &[f32], f: f32| x.iter().map(|a| a * f).collect::<Vec<f32>>();
    let half = 0.5f32.sqrt(); // head size 4: s = 1/2, sqrt(s) on each side
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &q);
    let tq = t.op("aten::linear", "attn.q", &[ti], &q);
    let tk = t.op("aten::linear", "attn.k", &[ti], &k);
    let tv = t.op("aten::linear", "attn.v", &[ti], &v);
    let att = t.op(
        "aten::scaled_dot_product_attention",
        "attn",
        &[tq, tk, tv],
        &z,
    );
    t.output(0, att);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &q);
    let oq = o.op("MatMul", "attn.q", &[oi], &scaled(&q, factor));
    let ok = o.op("MatMul", "attn.k", &[oi], &k);
    let ov = o.op("MatMul", "attn.v", &[oi], &v);
    let okm = o.op("Mul", "attn", &[ok], &scaled(&k, half));
    let oatt = o.op("MatMul", "attn", &[oq, okm, ov], &z);
    o.output(0, oatt);
    (t.build(), o.build(), [tq, tk, tv, att, oq, ok, ov, oatt])
}

/// The LSTM output of `lstm_output_rearranged`, [batch 2, seq 2, hidden 3].
pub(in crate::pairing) const LSTM_OUT: [f32; 12] = [
    1.0, -2.0, 3.0, 0.5, -1.5, 2.0, 0.25, 1.25, -0.75, 2.5, -3.0, 0.125,
];

/// `v` ([2, 2, 3]) with its first two axes exchanged.
pub(in crate::pairing) fn seq_first(v: &[f32]) -> Vec<f32> {
    let mut out = Vec::new();
    for s in 0..2 {
        for b in 0..2 {
            out.extend_from_slice(&v[b * 6 + s * 3..b * 6 + s * 3 + 3]);
        }
    }
    out
}

/// A batch-first LSTM whose closing Transpose an optimiser moved through the Reshape after
/// it: ONNX holds the LSTM's [batch 2, seq 2, hidden 3] output only as the next layout the
/// model asks for (batch and seq exchanged, a unit axis added: [2, 1, 2, 3]), in the module's
/// scope and with its shape once unit axes are dropped. `held` is that ONNX value. Ids: torch
/// lstm, permute, linear; onnx LSTM, Reshape, Gemm.
pub(in crate::pairing) fn lstm_output_rearranged(held: &[f32]) -> (Capture, Capture, [usize; 6]) {
    let x = [
        0.2, 0.4, -0.1, 0.3, 0.6, -0.5, 0.1, 0.8, -0.2, 0.9, 0.05, -0.7,
    ];
    let lstm = LSTM_OUT;
    let y: Vec<f32> = lstm.iter().map(|v| v * 0.5 + 0.1).collect();
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tl = t.op("aten::lstm", "rnn.lstm", &[ti], &lstm);
    let tp = t.op("aten::permute", "rnn", &[tl], &seq_first(&lstm));
    let tf = t.op("aten::linear", "rnn.fc", &[tp], &y);
    t.output(0, tf);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    // The LSTM's own output: [seq, directions, batch, hidden] with a padding row, another
    // shape.
    let mut own = seq_first(&lstm);
    own.extend([0.0; 3]);
    let ol = o.op("LSTM", "rnn.lstm", &[oi], &own);
    let or = o.op("Reshape", "rnn.lstm", &[ol], held);
    let of = o.op("Gemm", "rnn.fc", &[or], &y);
    o.output(0, of);
    let (mut tc, mut oc) = (t.build(), o.build());
    for id in [tl, tp] {
        reshape(&mut tc, id, &[2, 2, 3]);
    }
    reshape(&mut oc, or, &[2, 1, 2, 3]);
    (tc, oc, [tl, tp, tf, ol, or, of])
}

/// A layer scale (`x * gamma`, gamma a parameter) after a block's last Conv, folded by a
/// simplifier into that Conv's weights: the Conv node computes the scaled value, and the
/// scale has no node. Ids: torch conv, scale, residual add; onnx Conv, Add.
pub(in crate::pairing) fn layer_scale_folded_into_conv() -> (Capture, Capture, [usize; 5]) {
    let x = [1.0, -2.0, 3.0, -4.0];
    let conv = [2.0, -1.0, 0.5, 3.0];
    let gamma = [0.5, 2.0, -1.0, 0.25];
    let scaled = [1.0, -2.0, -0.5, 0.75];
    let out = [2.0, -4.0, 2.5, -3.25];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tc = t.op("aten::_convolution", "b.fc2", &[ti], &conv);
    let tg = t.op("aten::reshape", "b", &[], &gamma);
    let tm = t.op("aten::mul", "b", &[tc, tg], &scaled);
    let ta = t.op("aten::add", "b", &[tm, ti], &out);
    t.output(0, ta);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oc = o.op("Conv", "b.fc2", &[oi], &scaled);
    let oa = o.op("Add", "b", &[oc, oi], &out);
    o.output(0, oa);
    (t.build(), o.build(), [tc, tm, ta, oc, oa])
}

/// A transpose moved below the elementwise op after it (ONNX Runtime's transpose optimiser
/// computes `transpose(q * 2)` for `transpose(q) * 2`), for a query and a key alike: the
/// ONNX Mul has the other layout's shape, and the value of the TorchScript `mul` is held by
/// the Transpose after it. `key_factor` scales the ONNX key chain's Mul (2.0: clean).
/// Ids: torch q, k, q transpose, k transpose, q mul, k mul; onnx q, k, k mul, k mul
/// transposed, k transpose, q mul, q mul transposed, q transpose.
pub(in crate::pairing) fn transposes_moved_below_muls(
    key_factor: f32,
) -> (Capture, Capture, [usize; 14]) {
    let (q, k) = (
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        [-1.0, -3.0, -5.0, 2.0, 4.0, 6.0],
    );
    // `[2, 3]` transposed to `[3, 2]`.
    let tr = |v: &[f32]| vec![v[0], v[3], v[1], v[4], v[2], v[5]];
    let times = |f: f32, v: &[f32]| v.iter().map(|x| f * x).collect::<Vec<f32>>();
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &q);
    let tq = t.op("aten::linear", "attn.q", &[ti], &q);
    let tk = t.op("aten::linear", "attn.k", &[ti], &k);
    let tqt = t.op("aten::transpose", "attn", &[tq], &tr(&q));
    let tkt = t.op("aten::transpose", "attn", &[tk], &tr(&k));
    let tqm = t.op("aten::mul", "attn", &[tqt], &times(2.0, &tr(&q)));
    let tkm = t.op("aten::mul", "attn", &[tkt], &times(2.0, &tr(&k)));
    t.output(0, tqm);
    t.output(1, tkm);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &q);
    let oq = o.op("MatMul", "attn.q", &[oi], &q);
    let ok = o.op("MatMul", "attn.k", &[oi], &k);
    let okm = o.op("Mul", "attn", &[ok], &times(key_factor, &k));
    let okmt = o.op("Transpose", "attn", &[okm], &times(key_factor, &tr(&k)));
    let okt = o.op("Transpose", "attn", &[ok], &tr(&k));
    let oqm = o.op("Mul", "attn", &[oq], &times(2.0, &q));
    let oqmt = o.op("Transpose", "attn", &[oqm], &times(2.0, &tr(&q)));
    let oqt = o.op("Transpose", "attn", &[oq], &tr(&q));
    o.output(0, oqmt);
    o.output(1, okmt);
    let (mut tc, mut oc) = (t.build(), o.build());
    for id in [ti, tq, tk] {
        reshape(&mut tc, id, &[2, 3]);
    }
    for id in [tqt, tkt, tqm, tkm, tkm + 1, tkm + 2] {
        reshape(&mut tc, id, &[3, 2]);
    }
    for id in [oi, oq, ok, okm, oqm] {
        reshape(&mut oc, id, &[2, 3]);
    }
    for id in [okmt, okt, oqmt, oqt, oqt + 1, oqt + 2] {
        reshape(&mut oc, id, &[3, 2]);
    }
    let ids = [
        tq, tk, tqt, tkt, tqm, tkm, oq, ok, okm, okmt, okt, oqm, oqmt, oqt,
    ];
    (tc, oc, ids)
}

/// ONNX Runtime's transpose optimiser moved a key's Transpose below its rotary arithmetic
/// (`mul`, then `add`): ONNX computes both on the untransposed key ([2, 3]) and transposes
/// after the add, so no ONNX value holds the mul in TorchScript's layout ([3, 2]); two more
/// Muls of the mul's shape follow (the attention's scaled query). `mul_factor` is what the
/// ONNX Mul multiplies by (2.0: clean). Ids: torch linear, transpose, mul, add, matmul; onnx
/// MatMul, Mul, Add, Transpose, the two later Muls, MatMul.
pub(in crate::pairing) fn op_in_another_layout(mul_factor: f32) -> (Capture, Capture, [usize; 12]) {
    let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let a_t = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0];
    let times = |f: f32, v: &[f32]| v.iter().map(|x| f * x).collect::<Vec<f32>>();
    let plus_one = |v: &[f32]| v.iter().map(|x| x + 1.0).collect::<Vec<f32>>();
    let z = [0.5, -0.25, 0.125, 7.0, 3.0, 1.5];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &a);
    let lin = t.op("aten::linear", "attn.k", &[ti], &a);
    let tr = t.op("aten::transpose", "attn", &[lin], &a_t);
    let mul = t.op("aten::mul", "attn", &[tr], &times(2.0, &a_t));
    let add = t.op("aten::add", "attn", &[mul], &plus_one(&times(2.0, &a_t)));
    let mm = t.op("aten::matmul", "attn", &[add], &z);
    t.output(0, mm);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &a);
    let olin = o.op("MatMul", "attn.k", &[oi], &a);
    let omul = o.op("Mul", "attn", &[olin], &times(mul_factor, &a));
    let oadd = o.op("Add", "attn", &[omul], &plus_one(&times(2.0, &a)));
    let otr = o.op("Transpose", "attn", &[oadd], &plus_one(&times(2.0, &a_t)));
    // The attention's scaled query and a second scaling: two Muls of the mul's shape, so the
    // order's pair is one the values chose, not one structure placed.
    let olure = o.op("Mul", "attn", &[otr], &[9.0, -8.0, 7.5, -6.0, 5.5, -4.0]);
    let olure2 = o.op(
        "Mul",
        "attn",
        &[olure],
        &[4.5, -4.0, 3.75, -3.0, 2.75, -2.0],
    );
    let omm = o.op("MatMul", "attn", &[olure2], &z);
    o.output(0, omm);
    let (mut tc, mut oc) = (t.build(), o.build());
    reshape(&mut tc, lin, &[2, 3]);
    for id in [tr, mul, add, mm] {
        reshape(&mut tc, id, &[3, 2]);
    }
    for id in [olin, omul, oadd] {
        reshape(&mut oc, id, &[2, 3]);
    }
    for id in [otr, olure, olure2, omm] {
        reshape(&mut oc, id, &[3, 2]);
    }
    let ids = [
        lin, tr, mul, add, mm, olin, omul, oadd, otr, olure, olure2, omm,
    ];
    (tc, oc, ids)
}

/// ONNX Runtime's optimiser moved dense's bias and the residual Add into one scope-less
/// SkipLayerNormalization (node `SkipLayerNorm_AddBias_0`): dense's own scope ends in a bare
/// MatMul (its output minus the bias), and the LayerNorm's scope holds no node. Ids: torch
/// linear, add, layer norm, ffn; onnx MatMul, the fused node, Gemm.
pub(in crate::pairing) fn skip_layer_norm() -> (Capture, Capture, [usize; 7]) {
    let x = [1.0, 2.0, 3.0, 4.0];
    let dense = [2.0, 1.0, 4.0, 3.0];
    let matmul = [1.5, 0.0, 3.5, 2.0]; // dense minus the bias [0.5, 1.0] on each row
    let norm = [-1.0, 1.0, -1.0, 1.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let lin = t.op("aten::linear", "attn.dense", &[ti], &dense);
    let add = t.op("aten::add", "attn", &[lin, ti], &[3.0, 3.0, 7.0, 7.0]);
    let ln = t.op("aten::layer_norm", "attn.norm", &[add], &norm);
    let ffn = t.op("aten::linear", "ffn", &[ln], &[0.5; 4]);
    t.output(0, ffn);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let omm = o.op("MatMul", "attn.dense", &[oi], &matmul);
    let fused = o.op(
        "com.microsoft::SkipLayerNormalization",
        "",
        &[omm, oi],
        &norm,
    );
    o.values[fused].scope_recorded = false;
    o.values[fused].node = "SkipLayerNorm_AddBias_0".into();
    let offn = o.op("Gemm", "ffn", &[fused], &[0.5; 4]);
    o.output(0, offn);
    let (mut t, mut o) = (t.build(), o.build());
    for id in [ti, lin, add, ln, ffn, ffn + 1] {
        reshape(&mut t, id, &[2, 2]);
    }
    for id in [oi, omm, fused, offn, offn + 1] {
        reshape(&mut o, id, &[2, 2]);
    }
    (t, o, [lin, add, ln, ffn, omm, fused, offn])
}

/// A block's two residual adds, `x + attn(x)` and `h + mlp(h)`; ONNX Runtime's extended
/// level fused the second into the next LayerNorm (a scope-less SkipLayerNormalization), so
/// the block keeps one Add. A planted fault in attn makes that Add's value closest to the
/// second add's. Ids: torch attn, first add, norm2, mlp, second add, final norm; onnx attn,
/// Add, norm2, mlp, the fused node.
pub(in crate::pairing) fn residual_add_fused_into_norm() -> (Capture, Capture, [usize; 11]) {
    let x = [1.0, 2.0, 3.0, 4.0];
    let attn = [0.5, -0.5, 1.5, -1.5];
    let h = [1.5, 1.5, 4.5, 2.5];
    let n2 = [-1.0, -1.0, 1.0, 0.0];
    let mlp = [2.0, 1.0, 0.0, -1.0];
    let out = [3.5, 2.5, 4.5, 1.5];
    let norm = [0.5, -0.5, 1.5, -1.5];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let ta = t.op("aten::linear", "blk.attn", &[ti], &attn);
    let first = t.op("aten::add", "blk", &[ti, ta], &h);
    let tn2 = t.op("aten::layer_norm", "blk.norm2", &[first], &n2);
    let tm = t.op("aten::linear", "blk.mlp", &[tn2], &mlp);
    let second = t.op("aten::add", "blk", &[first, tm], &out);
    let tn = t.op("aten::layer_norm", "norm", &[second], &norm);
    t.output(0, tn);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oa = o.op("Gemm", "blk.attn", &[oi], &[2.5, 0.5, 1.5, -2.5]);
    let oadd = o.op("Add", "blk", &[oi, oa], &out);
    let on2 = o.op(
        "LayerNormalization",
        "blk.norm2",
        &[oadd],
        &[1.0, -1.0, 1.0, -1.0],
    );
    let om = o.op("Gemm", "blk.mlp", &[on2], &[0.0, 1.0, 2.0, 3.0]);
    let fused = o.op(
        "com.microsoft::SkipLayerNormalization",
        "",
        &[oadd, om],
        &norm,
    );
    o.values[fused].scope_recorded = false;
    o.values[fused].node = "SkipLayerNormalization".into();
    o.output(0, fused);
    let ids = [ta, first, tn2, tm, second, tn, oa, oadd, on2, om, fused];
    (t.build(), o.build(), ids)
}

/// An onnxslim'd dynamo export: no scopes, `silu(c)` is `Mul(c, Sigmoid(c))`, then the
/// residual Add. Ids: torch conv, silu, add; onnx Conv, Sigmoid, Mul, Add.
pub(in crate::pairing) fn silu_as_mul_and_sigmoid() -> (Capture, Capture, [usize; 7]) {
    let x = [1.0, -2.0];
    let sig = [0.731, 0.881];
    let silu = [1.462, 1.762];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let conv = t.op("aten::_convolution", "block.conv", &[ti], &[2.0, 2.0]);
    let act = t.op("aten::silu", "block.act", &[conv], &silu);
    let add = t.op("aten::add", "block", &[act, ti], &[2.462, -0.238]);
    t.output(0, add);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oconv = o.op("Conv", "", &[oi], &[2.0, 2.0]);
    let osig = o.op("Sigmoid", "", &[oconv], &sig);
    let omul = o.op("Mul", "", &[oconv, osig], &silu);
    let oadd = o.op("Add", "", &[omul, oi], &[2.462, -0.238]);
    o.output(0, oadd);
    let (t, mut o) = (t.build(), o.build());
    for v in &mut o.values {
        v.scope.clear();
        v.scope_recorded = false;
    }
    (t, o, [conv, act, add, oconv, osig, omul, oadd])
}

/// A transpose whose arrangement ONNX merged into the next one (equal dimensions give both
/// the same shape): its ONNX Transpose holds the key in the other arrangement while what it
/// feeds agrees. Ids: torch linear, transpose, matmul; onnx MatMul, Transpose, MatMul.
pub(in crate::pairing) fn transpose_merged_into_another() -> (Capture, Capture, [usize; 6]) {
    let x = [1.0, 2.0, 3.0, 4.0];
    let xt = [1.0, 3.0, 2.0, 4.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let lin = t.op("aten::linear", "attn.key", &[ti], &x);
    let tr = t.op("aten::transpose", "attn", &[lin], &x);
    let mm = t.op("aten::matmul", "attn", &[tr], &[9.0, 8.0, 7.0, 6.0]);
    t.output(0, mm);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let omm0 = o.op("MatMul", "attn.key", &[oi], &x);
    let otr = o.op("Transpose", "attn", &[omm0], &xt);
    let omm = o.op("MatMul", "attn", &[otr], &[9.0, 8.0, 7.0, 6.0]);
    o.output(0, omm);
    (t.build(), o.build(), [lin, tr, mm, omm0, otr, omm])
}

/// An attention module whose output is a transpose (batch first again), faulted inside (its
/// twin's values 5% off), read by a residual add that dilutes the fault to under 1% of its
/// range. Ids: torch linear, transpose, norm, add; onnx MatMul, Transpose, norm, Add.
pub(in crate::pairing) fn faulted_transpose_nearly_agreeing_reader(
) -> (Capture, Capture, [usize; 8]) {
    let x = [10.0, -20.0, 30.0, 5.0];
    let y = [0.3, -1.2, 2.0, 0.7];
    let sum = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(p, q)| p + q).collect::<Vec<_>>();
    let faulted: Vec<f32> = y.iter().map(|v| v * 1.05).collect();
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tl = t.op("aten::linear", "block.attn", &[ti], &y);
    let tt = t.op("aten::transpose", "block.attn", &[tl], &y);
    let tn = t.op("aten::layer_norm", "block.norm", &[ti], &x);
    let ta = t.op("aten::add", "block", &[tn, tt], &sum(&x, &y));
    t.output(0, ta);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let ol = o.op("MatMul", "block.attn", &[oi], &faulted);
    let ot = o.op("Transpose", "block.attn", &[ol], &faulted);
    let on = o.op("LayerNormalization", "block.norm", &[oi], &x);
    let oa = o.op("Add", "block", &[on, ot], &sum(&x, &faulted));
    o.output(0, oa);
    (t.build(), o.build(), [tl, tt, tn, ta, ol, ot, on, oa])
}

/// A fused projection chunked into query and key, each feeding a chain of the same ops and
/// shapes, and an optimiser that runs the key's chain first. Ids: torch linear, transpose,
/// q piece, k piece, q slice, k slice, q neg, k neg; onnx MatMul, Transpose, k Slice, k
/// slice, k Neg, q Slice, q slice, q Neg.
pub(in crate::pairing) fn chunked_projection() -> (Capture, Capture, [usize; 16]) {
    chunked_projection_with("prim::ListUnpack")
}

/// `chunked_projection` with the pieces recorded as `piece_op` (a `.pt2` records each piece
/// as an output of the split node itself, `aten::split_with_sizes`).
pub(in crate::pairing) fn chunked_projection_with(
    piece_op: &str,
) -> (Capture, Capture, [usize; 16]) {
    let qkv = [1.0, 2.0, 3.0, 4.0, -5.0, -6.0, -7.0, -8.0];
    let (q, k) = (&qkv[..4], &qkv[4..]);
    let (qr, kr) = (&q[..2], &k[..2]);
    let neg = |v: &[f32]| v.iter().map(|x| -x).collect::<Vec<f32>>();
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &qkv);
    let tl = t.op("aten::linear", "attn.qkv", &[ti], &qkv);
    let tt = t.op("aten::transpose", "attn", &[tl], &qkv);
    let tq = t.op(piece_op, "attn", &[tt], q);
    let tk = t.op(piece_op, "attn", &[tt], k);
    let tqr = t.op("aten::slice", "attn", &[tq], qr);
    let tkr = t.op("aten::slice", "attn", &[tk], kr);
    let tqn = t.op("aten::neg", "attn", &[tqr], &neg(qr));
    let tkn = t.op("aten::neg", "attn", &[tkr], &neg(kr));
    t.output(0, tqn);
    t.output(1, tkn);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &qkv);
    let ol = o.op("MatMul", "attn.qkv", &[oi], &qkv);
    let ot = o.op("Transpose", "attn", &[ol], &qkv);
    let ok = o.op("Slice", "attn", &[ot], k);
    let okr = o.op("Slice", "attn", &[ok], kr);
    let okn = o.op("Neg", "attn", &[okr], &neg(kr));
    let oq = o.op("Slice", "attn", &[ot], q);
    let oqr = o.op("Slice", "attn", &[oq], qr);
    let oqn = o.op("Neg", "attn", &[oqr], &neg(qr));
    o.output(0, oqn);
    o.output(1, okn);
    let ids = [
        tl, tt, tq, tk, tqr, tkr, tqn, tkn, ol, ot, ok, okr, okn, oq, oqr, oqn,
    ];
    (t.build(), o.build(), ids)
}

/// A module's own list of results unpacked (whole tensors, not pieces of one), with a layout
/// node of its shape after its producer on the ONNX side. Ids: torch linear, unpack, relu;
/// onnx MatMul, Reshape, Relu.
pub(in crate::pairing) fn unpacked_whole_tensor() -> (Capture, Capture, [usize; 6]) {
    let x = [1.0, 2.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tl = t.op("aten::linear", "m.fc", &[ti], &x);
    let tu = t.op("prim::ListUnpack", "m", &[tl], &x);
    let tr = t.op("aten::relu", "m", &[tu], &x);
    t.output(0, tr);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let ol = o.op("MatMul", "m.fc", &[oi], &x);
    let ors = o.op("Reshape", "m", &[ol], &x);
    let orl = o.op("Relu", "m", &[ors], &x);
    o.output(0, orl);
    (t.build(), o.build(), [tl, tu, tr, ol, ors, orl])
}

/// A RoI pooler takes `boxes[:, 2] - boxes[:, 0]` for the box areas; the box decoder after it
/// takes the same difference of the same boxes for the widths. The simplifier merged the two:
/// one Sub, in the pooler's scope, read by the decoder's Unsqueeze. Ids: torch pooler's
/// selects, sub, area; decoder's selects, sub, unsqueeze, mul; onnx Gathers, Sub, area Mul,
/// Unsqueeze, Mul.
pub(in crate::pairing) fn difference_merged_across_modules() -> (Capture, Capture, [usize; 15]) {
    let boxes = [1.0, 2.0, 3.0, 5.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &boxes);
    let g0 = t.op("aten::select", "roi.pool", &[ti], &[1.0, 2.0]);
    let g2 = t.op("aten::select", "roi.pool", &[ti], &[3.0, 5.0]);
    let w = t.op("aten::sub", "roi.pool", &[g2, g0], &[2.0, 3.0]);
    let area = t.op("aten::mul", "roi.pool", &[w, w], &[4.0, 9.0]);
    let r0 = t.op("aten::select", "roi", &[ti], &[1.0, 2.0]);
    let r2 = t.op("aten::select", "roi", &[ti], &[3.0, 5.0]);
    let rw = t.op("aten::sub", "roi", &[r2, r0], &[2.0, 3.0]);
    let un = t.op("aten::unsqueeze", "roi", &[rw], &[2.0, 3.0]);
    let m = t.op("aten::mul", "roi", &[un, area], &[8.0, 27.0]);
    t.output(0, m);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &boxes);
    let og0 = o.op("Gather", "roi.pool", &[oi], &[1.0, 2.0]);
    let og2 = o.op("Gather", "roi.pool", &[oi], &[3.0, 5.0]);
    let ow = o.op("Sub", "roi.pool", &[og2, og0], &[2.0, 3.0]);
    let oarea = o.op("Mul", "roi.pool", &[ow, ow], &[4.0, 9.0]);
    let oun = o.op("Unsqueeze", "roi", &[ow], &[2.0, 3.0]);
    let om = o.op("Mul", "roi", &[oun, oarea], &[8.0, 27.0]);
    o.output(0, om);
    let ids = [
        g0, g2, w, area, r0, r2, rw, un, m, og0, og2, ow, oarea, oun, om,
    ];
    (t.build(), o.build(), ids)
}

/// ONNX Runtime's extended level fuses a Linear and the ReLU its parent applies to it
/// (`F.relu(self.fc6(x))`) into one `FusedGemm` whose node name records no scope. Ids: torch
/// fc6, relu, fc7; onnx FusedGemm, Gemm.
pub(in crate::pairing) fn fused_gemm_with_activation() -> (Capture, Capture, [usize; 5]) {
    let x = [1.0, 2.0, 3.0, 4.0];
    let linear = [1.0, -2.0, 3.0, -4.0];
    let relu = [1.0, 0.0, 3.0, 0.0];
    let next = [0.5, 0.25, 1.5, 0.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let fc6 = t.op("aten::linear", "head.fc6", &[ti], &linear);
    let act = t.op("aten::relu", "head", &[fc6], &relu);
    let fc7 = t.op("aten::linear", "head.fc7", &[act], &next);
    t.output(0, fc7);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let fused = o.op("com.microsoft::FusedGemm", "", &[oi], &relu);
    o.values[fused].scope_recorded = false;
    o.values[fused].node = "fused /head/fc6/Gemm".into();
    let ofc7 = o.op("Gemm", "head.fc7", &[fused], &next);
    o.output(0, ofc7);
    (t.build(), o.build(), [fc6, act, fc7, fused, ofc7])
}

/// Two Linears and a Relu of one of them, added to the other; the only ONNX Relu of the scope
/// reads the other branch. Ids: torch a, b, relu, sum; onnx the same.
pub(in crate::pairing) fn relu_of_the_other_branch() -> (Capture, Capture, [usize; 8]) {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let a = t.op("aten::linear", "a", &[ti], &[1.0, 2.0]);
    let b = t.op("aten::linear", "b", &[ti], &[3.0, 4.0]);
    let r = t.op("aten::relu", "", &[a], &[1.0, 2.0]);
    let s = t.op("aten::add", "", &[r, b], &[4.0, 6.0]);
    t.output(0, s);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let oa = o.op("Gemm", "a", &[oi], &[1.0, 2.0]);
    let ob = o.op("Gemm", "b", &[oi], &[3.0, 4.0]);
    let or = o.op("Relu", "", &[ob], &[3.0, 4.0]);
    let os = o.op("Add", "", &[or, oa], &[4.0, 6.0]);
    o.output(0, os);
    (t.build(), o.build(), [a, b, r, s, oa, ob, or, os])
}

/// conv -> bn -> relu in TorchScript; the legacy exporter's Conv (conv scope) computes the bn
/// output, and there is no bn node. Ids: torch conv, bn, relu; onnx Conv, Relu.
pub(in crate::pairing) fn legacy_conv_batchnorm_fused() -> (Capture, Capture, [usize; 5]) {
    let x = [1.0, -2.0, 3.0];
    let conv = [2.0, -4.0, 6.0];
    let bn = [0.5, -1.5, 2.5];
    let relu = [0.5, 0.0, 2.5];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tc = t.op("aten::_convolution", "conv1", &[ti], &conv);
    let tb = t.op("aten::batch_norm", "bn1", &[tc], &bn);
    let tr = t.op("aten::relu_", "relu", &[tb], &relu);
    t.output(0, tr);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oc = o.op("Conv", "conv1", &[oi], &bn);
    let or = o.op("Relu", "relu", &[oc], &relu);
    o.output(0, or);
    (t.build(), o.build(), [tc, tb, tr, oc, or])
}

/// conv -> bn, dynamo style: the fused Conv carries the bn scope; the conv has no node. Ids:
/// torch conv, bn; onnx Conv.
pub(in crate::pairing) fn dynamo_conv_in_batchnorm_scope() -> (Capture, Capture, [usize; 3]) {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let tc = t.op("aten::_convolution", "conv1", &[ti], &[3.0, 4.0]);
    let tb = t.op("aten::batch_norm", "bn1", &[tc], &[0.1, 0.2]);
    t.output(0, tb);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let oc = o.op("Conv", "bn1", &[oi], &[0.1, 0.2]);
    o.output(0, oc);
    (t.build(), o.build(), [tc, tb, oc])
}

/// conv -> an op the kind table does not list -> relu, each with its ONNX node. Ids: torch
/// conv, the op, relu; onnx the same.
pub(in crate::pairing) fn unlisted_op_between_listed_ones() -> (Capture, Capture, [usize; 6]) {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let c = t.op("aten::_convolution", "blk.conv", &[ti], &[1.0, 2.0]);
    let odd = t.op("aten::frobnicate", "blk", &[c], &[5.0, 7.0]);
    let r = t.op("aten::relu", "blk", &[odd], &[5.0, 7.0]);
    t.output(0, r);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let oc = o.op("Conv", "blk.conv", &[oi], &[1.0, 2.0]);
    let oodd = o.op("Frob", "blk", &[oc], &[5.0, 7.0]);
    let or = o.op("Relu", "blk", &[oodd], &[5.0, 7.0]);
    o.output(0, or);
    (t.build(), o.build(), [c, odd, r, oc, oodd, or])
}
