//! Pairing on small synthetic captures: no runtime involved, every case built by hand.

use super::*;
use crate::capture::store::Stored;
use crate::capture::tensor::{DType, HostTensor};
use crate::capture::{Capture, CapturedValue, ScopeLevel, Side, ValueRole};
use graphs::{reshape, seq_first, LSTM_OUT};

pub(super) mod graphs;

/// Builds a capture value by value: `add(op, scope, inputs, data)`.
pub(super) struct Builder {
    side: Side,
    values: Vec<CapturedValue>,
}

impl Builder {
    pub(super) fn new(side: Side) -> Self {
        Builder {
            side,
            values: vec![],
        }
    }

    pub(super) fn push(
        &mut self,
        op: &str,
        scope: &str,
        role: ValueRole,
        inputs: &[usize],
        data: &[f32],
    ) -> usize {
        let id = self.values.len();
        let mut levels = vec![];
        let mut path = String::new();
        for seg in scope.split('.').filter(|s| !s.is_empty()) {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(seg);
            levels.push(ScopeLevel {
                path: path.clone(),
                class: String::new(),
            });
        }
        self.values.push(CapturedValue {
            id,
            name: format!("v{id}"),
            op: op.to_string(),
            node: if self.side == Side::Onnx {
                format!("/{}/{op}", scope.replace('.', "/"))
            } else {
                String::new()
            },
            scope: levels,
            scope_recorded: true,
            source: None,
            source_stack: Vec::new(),
            role,
            dtype: DType::F32,
            shape: vec![data.len()],
            inputs: inputs.to_vec(),
            tensor: Some(Stored::Memory(HostTensor::f32(
                vec![data.len()],
                data.to_vec(),
            ))),
        });
        id
    }

    pub(super) fn input(&mut self, n: usize, data: &[f32]) -> usize {
        self.push("input", "", ValueRole::Input(n), &[], data)
    }

    pub(super) fn op(&mut self, op: &str, scope: &str, inputs: &[usize], data: &[f32]) -> usize {
        self.push(op, scope, ValueRole::Intermediate, inputs, data)
    }

    pub(super) fn output(&mut self, n: usize, from: usize) -> usize {
        let data = match self.values[from].in_memory() {
            Some(t) => t
                .data
                .to_f64_vec()
                .iter()
                .map(|&v| v as f32)
                .collect::<Vec<_>>(),
            None => vec![],
        };
        self.push("output", "", ValueRole::Output(n), &[from], &data)
    }

    /// Gives value `id` another shape of the same element count (the data is row-major).
    pub(super) fn reshape(&mut self, id: usize, shape: &[usize]) {
        let v = &mut self.values[id];
        let data = (v.in_memory().expect("built in memory").data.to_f64_vec())
            .iter()
            .map(|&x| x as f32)
            .collect();
        v.shape = shape.to_vec();
        v.tensor = Some(Stored::Memory(HostTensor::f32(shape.to_vec(), data)));
    }

    pub(super) fn build(self) -> Capture {
        Capture {
            side: self.side,
            values: self.values,
            uncapturable: vec![],
            element_inputs: Default::default(),
            fx_nodes: Default::default(),
            module_aliases: Default::default(),
            control_flow: false,
        }
    }
}

/// Runs `pass` alone on the two captures, after the `earlier` pairs (torch, onnx) that the
/// passes before it would have made (stamped `earlier`, not certain): where a pass's own unit
/// test starts. The state's invariants are checked after it, as the runner does.
pub(super) fn run_alone(
    pass: &dyn passes::Pass,
    torch: &Capture,
    onnx: &Capture,
    earlier: &[(usize, usize)],
) -> PairState {
    run_alone_after(pass, torch, onnx, earlier, |_| {})
}

/// `run_alone`, with `prepare` leaving in the state what else the passes before would have
/// left besides uncertain pairs (a certain pair, a mark off the dataflow, a reason).
pub(super) fn run_alone_after(
    pass: &dyn passes::Pass,
    torch: &Capture,
    onnx: &Capture,
    earlier: &[(usize, usize)],
    prepare: impl FnOnce(&mut PairState),
) -> PairState {
    let mut p = Pairing::default();
    pair_boundary(torch, onnx, &mut p).expect("the boundary pairs");
    let boundary = p.inputs.iter().chain(&p.outputs).cloned().collect();
    let cx = PairCx::new(torch, onnx, boundary, ReadBack::Parallel);
    let mut state = PairState::new(cx.boundary.iter().map(|b| b.onnx));
    state.begin_pass("earlier");
    for &(t, o) in earlier {
        state.assign(t, o, false);
    }
    prepare(&mut state);
    state.begin_pass(pass.name());
    pass.run(&cx, &mut state);
    state.check();
    state
}

fn pair_of(p: &Pairing, torch: usize) -> Option<&Pair> {
    p.layers.iter().find(|l| l.torch == torch)
}

/// conv -> bn -> relu in TorchScript; the legacy exporter's Conv (conv scope) computes the
/// bn output, and there is no bn node.
#[test]
fn legacy_fused_conv_pairs_with_batchnorm_output() {
    let (t, o, [tc, tb, tr, oc, or]) = graphs::legacy_conv_batchnorm_fused();
    let p = pair(&t, &o).unwrap();

    let bn_pair = pair_of(&p, tb).expect("bn paired");
    assert_eq!(bn_pair.onnx, oc);
    assert_eq!(bn_pair.paired_by, "fusion");
    assert_eq!(bn_pair.fused, vec![tc]);
    assert!(
        pair_of(&p, tc).is_none(),
        "conv output must not be compared with the fused Conv"
    );
    assert_eq!(pair_of(&p, tr).unwrap().onnx, or);
    let conv_note = p
        .unpaired
        .iter()
        .find(|u| u.id == tc && u.side == Side::Torch)
        .unwrap();
    assert!(
        conv_note.accounted && matches!(conv_note.reason, UnpairedReason::FusedIntoNode { .. }),
        "{:?}",
        conv_note.reason
    );
    assert_eq!(
        p.coverage.torch_layers_paired,
        p.coverage.torch_layers_total
    );
}

/// A channel swap in the legacy exporter's folded Conv + BatchNorm that the ReLU after it
/// hides (both swapped channels negative): the bn has no ONNX node at all and the Conv is
/// the conv scope's only node, so the fused pair is structure's, certain, and the guard must
/// not doubt it for its agreeing consumer.
#[test]
fn a_batchnorm_folded_without_a_trace_is_paired_certainly() {
    let x = [1.0, -2.0, 3.0, 4.0];
    let bn = [-0.5, -1.5, 2.5, 1.0];
    let swapped = [-1.5, -0.5, 2.5, 1.0];
    let relu = [0.0, 0.0, 2.5, 1.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tc = t.op(
        "aten::_convolution",
        "attn.fc",
        &[ti],
        &[2.0, -4.0, 6.0, 8.0],
    );
    let tb = t.op("aten::batch_norm", "attn.bn", &[tc], &bn);
    let tr = t.op("aten::relu_", "attn.act", &[tb], &relu);
    t.output(0, tr);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oc = o.op("Conv", "attn.fc", &[oi], &swapped);
    let or = o.op("Relu", "attn.act", &[oc], &relu);
    o.output(0, or);
    let p = pair(&t.build(), &o.build()).unwrap();
    let bn_pair = pair_of(&p, tb).expect("bn paired");
    assert_eq!((bn_pair.onnx, bn_pair.paired_by), (oc, "fusion"));
    assert!(bn_pair.certain, "no other node can hold the bn output");
}

/// Same network, dynamo style: the fused Conv carries the bn scope; the conv has no node.
#[test]
fn dynamo_fused_conv_in_batchnorm_scope_accounts_for_the_conv() {
    let (t, o, [tc, tb, oc]) = graphs::dynamo_conv_in_batchnorm_scope();
    let p = pair(&t, &o).unwrap();
    let pr = pair_of(&p, tb).unwrap();
    assert_eq!(pr.onnx, oc);
    assert_eq!(pr.fused, vec![tc]);
    assert_eq!(p.coverage.torch_layers_paired, 2);
}

/// A fault inside the fused block must not make the pairing fall back to the conv output:
/// the values only choose between the two structural candidates.
#[test]
fn fusion_choice_survives_a_faulty_channel() {
    let conv = [10.0, 20.0, 30.0, 40.0];
    let bn = [1.0, 2.0, 3.0, 4.0];
    let faulty = [1.0, 2.0, 3.15, 4.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[0.0; 4]);
    let tc = t.op("aten::_convolution", "conv", &[ti], &conv);
    let tb = t.op("aten::batch_norm", "bn", &[tc], &bn);
    t.output(0, tb);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[0.0; 4]);
    let oc = o.op("Conv", "conv", &[oi], &faulty);
    o.output(0, oc);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, tb).unwrap().onnx, oc);
}

#[test]
fn module_called_twice_pairs_each_call_with_its_suffix() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0]);
    let r0 = t.op("aten::relu", "block.relu", &[ti], &[1.0]);
    let c = t.op("aten::_convolution", "block.conv", &[r0], &[2.0]);
    let r1 = t.op("aten::relu", "block.relu", &[c], &[2.0]);
    t.output(0, r1);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0]);
    let o0 = o.op("Relu", "block.relu", &[oi], &[1.0]);
    let oc = o.op("Conv", "block.conv", &[o0], &[2.0]);
    let o1 = o.op("Relu", "block.relu_1", &[oc], &[2.0]);
    o.output(0, o1);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, r0).unwrap().onnx, o0);
    assert_eq!(pair_of(&p, c).unwrap().onnx, oc);
    assert_eq!(pair_of(&p, r1).unwrap().onnx, o1);
}

#[test]
fn top_level_functional_ops_pair_by_kind_and_order() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let up = t.op(
        "aten::upsample_bilinear2d",
        "",
        &[ti],
        &[1.0, 1.5, 2.0, 2.0],
    );
    let cat = t.op("aten::cat", "", &[up, up], &[0.0; 8]);
    let add = t.op("aten::add", "", &[cat, cat], &[0.0; 8]);
    let head = t.op("aten::_convolution", "head", &[add], &[1.0; 8]);
    t.output(0, head);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let shape = o.op("Shape", "", &[oi], &[2.0]);
    let oup = o.op("Resize", "", &[oi, shape], &[1.0, 1.5, 2.0, 2.0]);
    let ocat = o.op("Concat", "", &[oup, oup], &[0.0; 8]);
    let oadd = o.op("Add", "", &[ocat, ocat], &[0.0; 8]);
    let ohead = o.op("Conv", "head", &[oadd], &[1.0; 8]);
    o.output(0, ohead);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, up).unwrap().onnx, oup);
    assert_eq!(pair_of(&p, cat).unwrap().onnx, ocat);
    assert_eq!(pair_of(&p, add).unwrap().onnx, oadd);
    for l in p.layers.iter().filter(|l| l.torch != head) {
        assert_eq!(l.paired_by, "op_order");
    }
    assert_eq!(pair_of(&p, head).unwrap().paired_by, "module_output");
}

#[test]
fn decomposed_module_pairs_with_its_last_node() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let g = t.op("aten::gelu", "mlp.act", &[ti], &[0.8, 1.9]);
    t.output(0, g);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let d = o.op("Div", "mlp.act", &[oi], &[0.7, 1.4]);
    let e = o.op("Erf", "mlp.act", &[d], &[0.6, 0.9]);
    let a = o.op("Add", "mlp.act", &[e], &[1.6, 1.9]);
    let m1 = o.op("Mul", "mlp.act", &[oi, a], &[1.6, 3.8]);
    let m2 = o.op("Mul", "mlp.act", &[m1], &[0.8, 1.9]);
    o.output(0, m2);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, g).unwrap().onnx, m2);
    assert_eq!(p.coverage.onnx_nodes_paired, p.coverage.onnx_nodes_total);
}

#[test]
fn dropout_is_accounted_for_not_unpaired() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0]);
    let c = t.op("aten::_convolution", "conv", &[ti], &[2.0]);
    let d = t.op("aten::dropout", "drop", &[c], &[2.0]);
    t.output(0, d);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0]);
    let oc = o.op("Conv", "conv", &[oi], &[2.0]);
    o.output(0, oc);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(
        p.coverage.torch_layers_paired,
        p.coverage.torch_layers_total
    );
    let note = p.unpaired.iter().find(|u| u.id == d).unwrap();
    assert!(note.accounted);
}

#[test]
fn inputs_pair_by_number_and_one_given_to_one_side_only_pairs_with_nothing() {
    // `signature::boundary` numbers an input only one model was given apart from the shared
    // ones: here TorchScript's input 1 (say, state ONNX does not take).
    let mut t = Builder::new(Side::Torch);
    let a = t.input(0, &[1.0]);
    t.input(1, &[1.0]);
    t.output(0, a);
    let mut o = Builder::new(Side::Onnx);
    let b = o.input(0, &[1.0]);
    o.output(0, b);
    let p = pair(&t.build(), &o.build()).unwrap();
    let pairs: Vec<_> = p.inputs.iter().map(|x| (x.torch, x.onnx)).collect();
    assert_eq!(pairs, [(a, b)]);
}

#[test]
fn different_networks_fail_loudly() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let mut last = ti;
    for i in 0..5 {
        last = t.op(
            "aten::_convolution",
            &format!("conv{i}"),
            &[last],
            &[1.0, 2.0],
        );
    }
    t.output(0, last);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let mut olast = oi;
    for i in 0..5 {
        olast = o.op("Softmax", &format!("head{i}"), &[olast], &[1.0, 2.0]);
    }
    o.output(0, olast);
    let err = pair(&t.build(), &o.build()).unwrap_err().to_string();
    assert!(err.contains("do not look like the same network"), "{err}");
}

#[test]
fn onnx_without_scopes_pairs_by_global_order() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0]);
    let c = t.op("aten::_convolution", "conv", &[ti], &[2.0]);
    let r = t.op("aten::relu", "act", &[c], &[2.0]);
    t.output(0, r);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0]);
    let oc = o.op("Conv", "", &[oi], &[2.0]);
    let or = o.op("Relu", "", &[oc], &[2.0]);
    o.output(0, or);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, c).unwrap().paired_by, "global_order");
    assert_eq!(pair_of(&p, r).unwrap().onnx, or);
}

/// A residual block with a downsample, BatchNorms folded into the Convs by a simplifier and
/// no scopes (r(2+1)d's blocks under onnxslim): ONNX sorts the downsample's Conv before the
/// main branch's Relu, and the global order gives the main branch's second conv that Conv.
/// The dataflow check must not move the conv onto the folded node its BatchNorm holds and
/// agrees with (which crossed every pair after it): the conv is fused into that node.
#[test]
fn a_conv_off_the_dataflow_is_fused_into_the_node_its_agreeing_batchnorm_holds() {
    let x = [1.0, -2.0, 3.0, 0.5];
    let (a, ab, ar) = (
        [2.0, -4.0, 6.0, 1.0],
        [0.5, -1.5, 2.5, 0.2],
        [0.5, 0.0, 2.5, 0.2],
    );
    let (c, cb, cr) = ([3.0, 1.0, -2.0], [1.2, 0.1, -0.9], [1.2, 0.1, 0.0]);
    let (d, db) = ([-1.0, 4.0, 2.0], [-0.3, 1.7, 0.8]);
    let add: Vec<f32> = cr.iter().zip(&db).map(|(p, q)| p + q).collect();
    let out: Vec<f32> = add.iter().map(|v| v.max(0.0)).collect();
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let ta = t.op("aten::_convolution", "b.conv1", &[ti], &a);
    let tab = t.op("aten::batch_norm", "b.bn1", &[ta], &ab);
    let tar = t.op("aten::relu_", "b.relu1", &[tab], &ar);
    let tc = t.op("aten::_convolution", "b.conv2", &[tar], &c);
    let tcb = t.op("aten::batch_norm", "b.bn2", &[tc], &cb);
    let tcr = t.op("aten::relu_", "b.relu2", &[tcb], &cr);
    let td = t.op("aten::_convolution", "b.down.0", &[ti], &d);
    let tdb = t.op("aten::batch_norm", "b.down.1", &[td], &db);
    let tadd = t.op("aten::add_", "b", &[tcr, tdb], &add);
    let tout = t.op("aten::relu_", "b.relu3", &[tadd], &out);
    t.output(0, tout);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oa = o.op("Conv", "", &[oi], &ab);
    let od = o.op("Conv", "", &[oi], &db);
    let or = o.op("Relu", "", &[oa], &ar);
    let oc = o.op("Conv", "", &[or], &cb);
    let ocr = o.op("Relu", "", &[oc], &cr);
    let oadd = o.op("Add", "", &[ocr, od], &add);
    let oout = o.op("Relu", "", &[oadd], &out);
    o.output(0, oout);
    // What a simplifier leaves: no node records a scope.
    for v in &mut o.values {
        v.scope_recorded = false;
    }
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, tcb).map(|l| l.onnx), Some(oc));
    assert_eq!(pair_of(&p, tdb).map(|l| l.onnx), Some(od));
    assert_eq!(pair_of(&p, tar).map(|l| l.onnx), Some(or));
    assert!(pair_of(&p, tc).is_none());
    let fused = p
        .unpaired
        .iter()
        .find(|u| u.id == tc)
        .expect("conv unpaired");
    assert!(fused.accounted, "{:?}", fused.reason);
    let _ = (tab, tcr, tadd);
}

#[test]
fn scopeless_linear_pairs_with_its_add_not_with_gelu_partial_product() {
    // The dynamo fallback's false alarm: linear -> gelu with no scopes. ONNX holds
    // MatMul, Add (the linear), then GELU's Div, Erf, Add, Mul (x * (1 + erf), twice the
    // GELU) and Mul (the GELU). Order alone gives the linear the partial product.
    let x = [0.5f32, -1.0, 2.0];
    let lin: Vec<f32> = x.iter().map(|v| v * 2.0 + 0.1).collect();
    let gelu: Vec<f32> = lin
        .iter()
        .map(|&v| 0.5 * v * (1.0 + libm_erf(v / 2f32.sqrt())))
        .collect();
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tl = t.op("aten::linear", "fc", &[ti], &lin);
    let tg = t.op("aten::gelu", "act", &[tl], &gelu);
    t.output(0, tg);

    let matmul: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
    let div: Vec<f32> = lin.iter().map(|v| v / 2f32.sqrt()).collect();
    let erf: Vec<f32> = div.iter().map(|&v| libm_erf(v)).collect();
    let add1: Vec<f32> = erf.iter().map(|v| v + 1.0).collect();
    let twice: Vec<f32> = lin.iter().zip(&add1).map(|(a, b)| a * b).collect();
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let om = o.op("MatMul", "", &[oi], &matmul);
    let oa = o.op("Add", "", &[om], &lin);
    let od = o.op("Div", "", &[oa], &div);
    let oe = o.op("Erf", "", &[od], &erf);
    let oa1 = o.op("Add", "", &[oe], &add1);
    let ot = o.op("Mul", "", &[oa, oa1], &twice);
    let og = o.op("Mul", "", &[ot], &gelu);
    o.output(0, og);

    let p = pair(&t.build(), &o.build()).unwrap();
    let linear = pair_of(&p, tl).unwrap();
    assert_eq!(linear.onnx, oa);
    // The order placed it among several candidates the values chose from.
    assert_eq!(linear.paired_by, "global_order");
    assert!(!linear.certain);
    assert_eq!(pair_of(&p, tg).unwrap().onnx, og);
}

/// erf by Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7): enough for made-up test data.
fn libm_erf(x: f32) -> f32 {
    let x = f64::from(x);
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let y = 1.0
        - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736) * t
            + 0.254_829_592)
            * t
            * (-x * x).exp();
    y.copysign(x) as f32
}

#[test]
fn roll_pairs_with_the_concat_that_completes_it() {
    // torch.roll over two dims: Slice/Slice/Concat per dim; the first Concat (rolled along
    // one dim only) has the output's shape and kind but not its value.
    let x = [1.0f32, 2.0, 3.0, 4.0];
    let half = [2.0f32, 1.0, 4.0, 3.0];
    let full = [4.0f32, 3.0, 2.0, 1.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tr = t.op("aten::roll", "block", &[ti], &full);
    let tn = t.op("aten::relu", "block.act", &[tr], &full);
    t.output(0, tn);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oc1 = o.op("Concat", "block", &[oi], &half);
    let oc2 = o.op("Concat", "block", &[oc1], &full);
    let on = o.op("Relu", "block.act", &[oc2], &full);
    o.output(0, on);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, tr).unwrap().onnx, oc2);
}

#[test]
fn pairs_reordered_by_an_optimiser_follow_the_dataflow() {
    // attn computes q = q_proj(x), k = k_proj(x) and views each; an optimiser sorted the
    // ONNX graph so that k's Reshape comes before q's. Order alone pairs q's view with k's
    // Reshape; the dataflow moves it to the Reshape computed from q.
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let q = t.op("aten::linear", "attn.q_proj", &[ti], &[1.0, 2.0]);
    let qv = t.op("aten::view", "attn", &[q], &[1.0, 2.0]);
    let k = t.op("aten::linear", "attn.k_proj", &[ti], &[3.0, 4.0]);
    let kv = t.op("aten::view", "attn", &[k], &[3.0, 4.0]);
    let sum = t.op("aten::add", "attn", &[qv, kv], &[4.0, 6.0]);
    t.output(0, sum);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let oq = o.op("Gemm", "attn.q_proj", &[oi], &[1.0, 2.0]);
    let ok = o.op("Gemm", "attn.k_proj", &[oi], &[3.0, 4.0]);
    let okv = o.op("Reshape", "attn", &[ok], &[3.0, 4.0]);
    let oqv = o.op("Reshape", "attn", &[oq], &[1.0, 2.0]);
    let osum = o.op("Add", "attn", &[oqv, okv], &[4.0, 6.0]);
    o.output(0, osum);
    let p = pair(&t.build(), &o.build()).unwrap();
    let q_view = pair_of(&p, qv).unwrap();
    assert_eq!(q_view.onnx, oqv);
    assert_eq!(q_view.paired_by, "dataflow");
    assert_eq!(pair_of(&p, kv).unwrap().onnx, okv);
    assert_eq!(pair_of(&p, sum).unwrap().onnx, osum);
    assert!(p.layers.iter().all(|l| l.follows_dataflow));
}

#[test]
fn a_pair_no_value_repairs_is_marked_off_the_dataflow() {
    // The only ONNX Relu of the scope is computed from the wrong branch: kept, but marked.
    let (t, o, [_, _, r, s, _, _, or, _]) = graphs::relu_of_the_other_branch();
    let p = pair(&t, &o).unwrap();
    let relu = pair_of(&p, r).unwrap();
    assert_eq!(relu.onnx, or);
    assert!(!relu.follows_dataflow);
    assert!(pair_of(&p, s).unwrap().follows_dataflow);
}

/// A box's x and y coordinates clipped by two chains (`max`, then `min`) that a saved ONNX
/// Runtime graph runs y first, with no node left for the slice that starts the x chain: the
/// order pairs the x chain with the y chain's nodes, and the x `max` still follows the
/// dataflow (its nearest paired producer is what both chains read). The y `max`, checked
/// later, does not; its one candidate is held by the earlier crossed pair, and the two
/// exchange, link by link.
#[test]
fn crossed_chains_whose_first_link_has_no_twin_are_exchanged() {
    let boxes = [1.0, 2.0, 3.0, 4.0];
    let (sx, sy) = ([1.0, 3.0], [2.0, 4.0]);
    let (mx, nx, my, ny) = ([2.0, 3.0], [2.0, 2.5], [3.0, 4.0], [3.0, 3.5]);
    let out = [2.0, 2.5, 3.0, 3.5];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &boxes);
    let tb = t.op("aten::mul", "", &[ti], &boxes);
    let tsx = t.op("aten::slice", "", &[tb], &sx);
    let tsy = t.op("aten::slice", "", &[tb], &sy);
    let tmx = t.op("aten::max", "", &[tsx], &mx);
    let tnx = t.op("aten::min", "", &[tmx], &nx);
    let tmy = t.op("aten::max", "", &[tsy], &my);
    let tny = t.op("aten::min", "", &[tmy], &ny);
    let tc = t.op("aten::cat", "", &[tnx, tny], &out);
    t.output(0, tc);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &boxes);
    let ob = o.op("Mul", "", &[oi], &boxes);
    let osy = o.op("Slice", "", &[ob], &sy);
    let omy = o.op("Max", "", &[osy], &my);
    let ony = o.op("Min", "", &[omy], &ny);
    let omx = o.op("Max", "", &[ob], &mx);
    let onx = o.op("Min", "", &[omx], &nx);
    let oc = o.op("Concat", "", &[onx, ony], &out);
    o.output(0, oc);
    let p = pair(&t.build(), &o.build()).unwrap();
    for (tv, ov) in [(tmx, omx), (tnx, onx), (tmy, omy), (tny, ony)] {
        let made = pair_of(&p, tv).unwrap_or_else(|| panic!("value {tv} is compared"));
        assert_eq!(made.onnx, ov, "value {tv}");
        assert!(made.follows_dataflow, "value {tv}");
    }
}

#[test]
fn a_skip_layer_norm_pairs_with_the_layer_norm_and_covers_the_bias_and_residual() {
    // ONNX Runtime's optimiser moved dense's bias and the residual Add into one scope-less
    // SkipLayerNormalization: dense's own scope ends in a bare MatMul (its output minus the
    // bias), and the LayerNorm's scope holds no node.
    let (t, o, [lin, add, ln, _, _, fused, _]) = graphs::skip_layer_norm();
    let p = pair(&t, &o).unwrap();
    let norm_pair = pair_of(&p, ln).expect("the LayerNorm is paired");
    assert_eq!(norm_pair.onnx, fused);
    assert_eq!(norm_pair.paired_by, "scopeless");
    assert!(
        pair_of(&p, lin).is_none(),
        "a bias-less MatMul is not the Linear's twin"
    );
    for id in [lin, add] {
        let u = p.unpaired.iter().find(|u| u.id == id).unwrap();
        assert!(u.accounted, "{}: {:?}", u.name, u.reason);
        assert!(
            matches!(&u.reason, UnpairedReason::FusedIntoConsumer { node, .. }
                if node == "SkipLayerNorm_AddBias_0"),
            "{:?}",
            u.reason
        );
    }
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

/// ONNX Runtime's extended level fuses a Linear and the ReLU its parent applies to it
/// (`F.relu(self.fc6(x))`) into one `FusedGemm` whose node name records no scope: the node
/// meets the Linear only in `pair_scopeless`, and it holds the ReLU's output.
#[test]
fn a_scopeless_fused_gemm_pairs_with_the_activation_after_its_linear() {
    let (t, o, [fc6, act, _, fused, _]) = graphs::fused_gemm_with_activation();
    let p = pair(&t, &o).unwrap();
    let relu_pair = pair_of(&p, act).expect("the ReLU is paired");
    assert_eq!(relu_pair.onnx, fused);
    assert_eq!(relu_pair.paired_by, "scopeless");
    assert_eq!(relu_pair.fused, vec![fc6]);
    assert!(
        pair_of(&p, fc6).is_none(),
        "the Linear is fused, not compared"
    );
    let u = p.unpaired.iter().find(|u| u.id == fc6).unwrap();
    assert!(
        u.accounted && matches!(u.reason, UnpairedReason::FusedIntoNode { .. }),
        "{:?}",
        u.reason
    );
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

#[test]
fn sibling_projections_crossed_by_the_order_are_uncrossed_by_their_values() {
    // An optimiser put the key's Gemm before the query's: the order pairs them crosswise,
    // the dataflow cannot tell siblings apart, the values can.
    let (t, o, [q, k, oq, ok]) = graphs::sibling_projections(&[1.0, 2.0], true);
    let p = pair(&t, &o).unwrap();
    assert_eq!(pair_of(&p, q).unwrap().onnx, oq);
    assert_eq!(pair_of(&p, k).unwrap().onnx, ok);
    assert_eq!(pair_of(&p, q).unwrap().paired_by, "uncross_siblings");
}

#[test]
fn a_faulty_sibling_keeps_its_pair() {
    // The query's ONNX value is wrong (a planted fault): no other assignment matches every
    // sibling closely, so nothing moves and the fault stays where it is.
    let (t, o, [q, k, oq, ok]) = graphs::sibling_projections(&[1.5, 2.5], false);
    let p = pair(&t, &o).unwrap();
    assert_eq!(pair_of(&p, q).unwrap().onnx, oq);
    assert_eq!(pair_of(&p, k).unwrap().onnx, ok);
}

#[test]
fn a_silu_written_as_mul_and_sigmoid_pairs_at_the_mul_and_the_add_at_the_add() {
    // onnxslim'd dynamo export: no scopes, `silu(c)` is `Mul(c, Sigmoid(c))`, then the
    // residual Add. The add must not meet the Mul (a shift that fails every later pair).
    let (t, o, [conv, act, add, oconv, _, omul, oadd]) = graphs::silu_as_mul_and_sigmoid();
    let p = pair(&t, &o).unwrap();
    assert_eq!(pair_of(&p, conv).unwrap().onnx, oconv);
    assert_eq!(pair_of(&p, act).unwrap().onnx, omul);
    assert_eq!(pair_of(&p, add).unwrap().onnx, oadd);
}

/// ONNX Runtime's saved graph: one FusedConv (conv scope) computes conv, bn and the first
/// relu call; the block's second relu call keeps its node as `relu_1`. The BatchNorm is
/// further from the fused output than the conv is (ReLU zeroed its negatives), so only the
/// chain weighed as a whole finds that the node computes the ReLU.
#[test]
fn a_fused_conv_carries_its_batchnorm_and_activation() {
    let x = [1.0, -2.0, 3.0, -4.0];
    let conv = [1.0, -2.0, 3.0, -4.0];
    let bn = [0.9, -2.2, 2.9, -4.1];
    let relu = [0.9, 0.0, 2.9, 0.0];
    let out = [1.9, 0.0, 5.9, 0.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tc = t.op("aten::_convolution", "b.conv1", &[ti], &conv);
    let tb = t.op("aten::batch_norm", "b.bn1", &[tc], &bn);
    let tr0 = t.op("aten::relu_", "b.relu", &[tb], &relu);
    let ta = t.op("aten::add", "b", &[tr0, tr0], &out);
    let tr1 = t.op("aten::relu_", "b.relu", &[ta], &out);
    t.output(0, tr1);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let of = o.op("com.microsoft::FusedConv", "b.conv1", &[oi], &relu);
    let oa = o.op("Add", "b", &[of, of], &out);
    let or1 = o.op("Relu", "b.relu_1", &[oa], &out);
    o.output(0, or1);
    let p = pair(&t.build(), &o.build()).unwrap();
    let fused = pair_of(&p, tr0).expect("the first relu call is compared");
    assert_eq!(fused.onnx, of);
    assert_eq!(fused.paired_by, "fusion");
    assert_eq!(fused.fused, vec![tc, tb]);
    // `relu_1` is the second call although the first left no node.
    assert_eq!(pair_of(&p, tr1).unwrap().onnx, or1);
    assert!(pair_of(&p, tc).is_none() && pair_of(&p, tb).is_none());
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

/// An SPPF block applies one pooling module three times in a row: one run of values in
/// TorchScript, three named calls in ONNX. Call i pairs with call i.
#[test]
fn a_module_applied_three_times_in_a_row_pairs_call_by_call() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let c = t.op("aten::_convolution", "sppf.cv1", &[ti], &[1.0, 2.0]);
    let m0 = t.op("aten::max_pool2d", "sppf.m", &[c], &[2.0, 2.0]);
    let m1 = t.op("aten::max_pool2d", "sppf.m", &[m0], &[3.0, 3.0]);
    let m2 = t.op("aten::max_pool2d", "sppf.m", &[m1], &[4.0, 4.0]);
    let cat = t.op("aten::cat", "sppf", &[c, m0, m1, m2], &[0.0; 8]);
    t.output(0, cat);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let oc = o.op("Conv", "sppf.cv1", &[oi], &[1.0, 2.0]);
    let om0 = o.op("MaxPool", "sppf.m", &[oc], &[2.0, 2.0]);
    let om1 = o.op("MaxPool", "sppf.m_1", &[om0], &[3.0, 3.0]);
    let om2 = o.op("MaxPool", "sppf.m_2", &[om1], &[4.0, 4.0]);
    let ocat = o.op("Concat", "sppf", &[oc, om0, om1, om2], &[0.0; 8]);
    o.output(0, ocat);
    let p = pair(&t.build(), &o.build()).unwrap();
    for (tm, om) in [(m0, om0), (m1, om1), (m2, om2)] {
        let pm = pair_of(&p, tm).expect("every call is compared");
        assert_eq!(pm.onnx, om);
        assert!(
            pm.certain,
            "one MaxPool per call: structure alone placed it"
        );
    }
}

/// A module whose own forward repeats an op is one call when ONNX says so too.
#[test]
fn a_module_repeating_an_op_in_one_call_is_not_split() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let a = t.op("aten::mul", "scale", &[ti], &[2.0, 4.0]);
    let b = t.op("aten::mul", "scale", &[a], &[6.0, 12.0]);
    t.output(0, b);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let oa = o.op("Mul", "scale", &[oi], &[2.0, 4.0]);
    let ob = o.op("Mul", "scale", &[oa], &[6.0, 12.0]);
    o.output(0, ob);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, b).unwrap().onnx, ob);
    assert!(pair_of(&p, a).is_none(), "internal to the call");
}

/// An op the kind table does not know pairs by dataflow, shape and place: the one free ONNX
/// value of its call computed from its producer's twin and feeding its consumer's.
#[test]
fn an_unlisted_op_pairs_by_dataflow() {
    let (t, o, [_, odd, r, _, oodd, or]) = graphs::unlisted_op_between_listed_ones();
    let p = pair(&t, &o).unwrap();
    let made = pair_of(&p, odd).expect("the unlisted op is compared");
    assert_eq!(made.onnx, oodd);
    assert_eq!(made.paired_by, "left_open");
    assert_eq!(pair_of(&p, r).unwrap().onnx, or);
}

/// Two independent chains of one scope that the ONNX graph runs interleaved (a simplifier
/// sorted it again): the order-keeping alignment pairs one chain, and the other still pairs
/// link by link through the wiring instead of being left open.
#[test]
fn chains_in_another_order_pair_by_dataflow() {
    let (q, k) = ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0]);
    let neg = |v: &[f32]| v.iter().map(|x| -x).collect::<Vec<f32>>();
    let dbl = |v: &[f32]| v.iter().map(|x| -2.0 * x).collect::<Vec<f32>>();
    let mut t = Builder::new(Side::Torch);
    let tq_in = t.input(0, &q);
    let tk_in = t.input(1, &k);
    let tq = t.op("aten::linear", "attn.q", &[tq_in], &q);
    let tk = t.op("aten::linear", "attn.k", &[tk_in], &k);
    let nq = t.op("aten::neg", "attn", &[tq], &neg(&q));
    let mq = t.op("aten::mul", "attn", &[nq], &dbl(&q));
    let nk = t.op("aten::neg", "attn", &[tk], &neg(&k));
    let mk = t.op("aten::mul", "attn", &[nk], &dbl(&k));
    t.output(0, mq);
    t.output(1, mk);
    let mut o = Builder::new(Side::Onnx);
    let oq_in = o.input(0, &q);
    let ok_in = o.input(1, &k);
    let oq = o.op("MatMul", "attn.q", &[oq_in], &q);
    let ok = o.op("MatMul", "attn.k", &[ok_in], &k);
    let onk = o.op("Neg", "attn", &[ok], &neg(&k));
    let onq = o.op("Neg", "attn", &[oq], &neg(&q));
    let omk = o.op("Mul", "attn", &[onk], &dbl(&k));
    let omq = o.op("Mul", "attn", &[onq], &dbl(&q));
    o.output(0, omq);
    o.output(1, omk);
    let p = pair(&t.build(), &o.build()).unwrap();
    for (tv, ov) in [(nq, onq), (mq, omq), (nk, onk), (mk, omk)] {
        let made = pair_of(&p, tv).unwrap_or_else(|| panic!("value {tv} is compared"));
        assert_eq!(made.onnx, ov, "value {tv}");
    }
    assert!(
        [nq, mq, nk, mk]
            .iter()
            .any(|&v| pair_of(&p, v).unwrap().paired_by == "left_open"),
        "one chain is left to the dataflow fill"
    );
}

/// A transpose whose arrangement ONNX merged into the next one (equal dimensions give both
/// the same shape): order pairs it with the merged Transpose, whose values differ while what
/// it feeds agrees. It is left unpaired and covered, not shown as a failing layer.
#[test]
fn a_layout_op_merged_into_another_is_unpaired_and_covered() {
    let (t, o, [_, tr, mm, _, _, omm]) = graphs::transpose_merged_into_another();
    let p = pair(&t, &o).unwrap();
    assert!(
        pair_of(&p, tr).is_none(),
        "the merged transpose has no twin"
    );
    let u = p.unpaired.iter().find(|u| u.id == tr).unwrap();
    assert!(u.accounted, "{:?}", u.reason);
    assert_eq!(pair_of(&p, mm).unwrap().onnx, omm);
}

/// A TopK's two outputs share one shape; the ONNX side lists the indices first. Values pair
/// with values and indices with indices, whatever the order: a float never meets an index.
/// (Equal contents here, so that only the kind of number can tell them apart.)
#[test]
fn multi_output_values_and_indices_pair_by_kind_of_number() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[0.3, 0.9, 0.1]);
    let tc = t.op("aten::_convolution", "head.conv", &[ti], &[0.6, 1.8, 0.2]);
    let tv = t.op("aten::topk", "head", &[tc], &[1.0, 0.0]);
    let tx = t.op("aten::topk", "head", &[tc], &[1.0, 0.0]);
    t.values[tx].dtype = DType::I64;
    // Two-dimensional, as a batch's TopK is: a 1-D index vector this small is bookkeeping.
    t.values[tv].shape = vec![1, 2];
    t.values[tx].shape = vec![1, 2];
    t.output(0, tc);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[0.3, 0.9, 0.1]);
    let oc = o.op("Conv", "head.conv", &[oi], &[0.6, 1.8, 0.2]);
    let ox = o.op("TopK", "head", &[oc], &[1.0, 0.0]);
    o.values[ox].dtype = DType::I64;
    let ov = o.op("TopK", "head", &[oc], &[1.0, 0.0]);
    o.values[ov].shape = vec![1, 2];
    o.values[ox].shape = vec![1, 2];
    o.output(0, oc);
    // Both TopK outputs are returned: a value no output reads has no twin to meet.
    t.output(1, tv);
    t.output(2, tx);
    o.output(1, ov);
    o.output(2, ox);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, tv).map(|q| q.onnx), Some(ov));
    assert_ne!(pair_of(&p, tx).map(|q| q.onnx), Some(ov));
}

/// A program that keeps a value nobody reads (RAFT's flow upsampled after each refinement
/// step), equal bit for bit to a live one and computed before it: the unused value is set
/// apart, so the live one meets the ONNX twin, and it is listed as covered.
#[test]
fn an_unused_value_equal_to_a_live_one_never_takes_its_twin() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[0.3, 0.9, 0.1]);
    let tc = t.op("aten::_convolution", "conv", &[ti], &[0.6, 1.8, 0.2]);
    let unused = t.op("aten::sub", "", &[tc], &[0.5, 1.7, 0.1]);
    let live = t.op("aten::sub", "", &[tc], &[0.5, 1.7, 0.1]);
    let tr = t.op("aten::relu", "", &[live], &[0.5, 1.7, 0.1]);
    t.output(0, tr);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[0.3, 0.9, 0.1]);
    let oc = o.op("Conv", "conv", &[oi], &[0.6, 1.8, 0.2]);
    let os = o.op("Sub", "", &[oc], &[0.5, 1.7, 0.1]);
    let or = o.op("Relu", "", &[os], &[0.5, 1.7, 0.1]);
    o.output(0, or);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, live).map(|q| q.onnx), Some(os));
    assert!(pair_of(&p, unused).is_none());
    let u = p.unpaired.iter().find(|u| u.id == unused).unwrap();
    assert!(u.accounted, "{:?}", u.reason);
    assert_eq!(u.reason, UnpairedReason::ReachesNoOutput);
    assert_eq!(
        (
            p.coverage.torch_layers_paired,
            p.coverage.torch_layers_total
        ),
        (4, 4)
    );
}

/// Inside control flow (a scripted loop) the outputs' ancestry is not complete: nothing is
/// set apart, and a value that reads as unused is still paired and compared.
#[test]
fn a_capture_with_control_flow_sets_nothing_apart() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[0.3, 0.9, 0.1]);
    let tc = t.op("aten::_convolution", "conv", &[ti], &[0.6, 1.8, 0.2]);
    let looks_unused = t.op("aten::relu", "", &[tc], &[0.6, 1.8, 0.2]);
    t.output(0, tc);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[0.3, 0.9, 0.1]);
    let oc = o.op("Conv", "conv", &[oi], &[0.6, 1.8, 0.2]);
    let or = o.op("Relu", "", &[oc], &[0.6, 1.8, 0.2]);
    o.output(0, oc);
    let mut torch = t.build();
    torch.control_flow = true;
    let p = pair(&torch, &o.build()).unwrap();
    assert_eq!(pair_of(&p, looks_unused).map(|q| q.onnx), Some(or));
}

/// A capture whose dataflow to the output is cut (a value recorded without its producer)
/// makes most values look unused: none is set apart, and they pair as before, rather than
/// leaving nothing compared while everything counts as covered.
#[test]
fn values_behind_a_cut_in_the_dataflow_are_not_taken_for_unused() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[0.3, 0.9, 0.1]);
    let c1 = t.op("aten::_convolution", "conv1", &[ti], &[0.6, 1.8, 0.2]);
    let c2 = t.op("aten::_convolution", "conv2", &[c1], &[1.2, 3.6, 0.4]);
    let cut = t.op("aten::relu", "", &[], &[1.2, 3.6, 0.4]);
    t.output(0, cut);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[0.3, 0.9, 0.1]);
    let o1 = o.op("Conv", "conv1", &[oi], &[0.6, 1.8, 0.2]);
    let o2 = o.op("Conv", "conv2", &[o1], &[1.2, 3.6, 0.4]);
    let or = o.op("Relu", "", &[o2], &[1.2, 3.6, 0.4]);
    o.output(0, or);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, c1).map(|q| q.onnx), Some(o1));
    assert_eq!(pair_of(&p, c2).map(|q| q.onnx), Some(o2));
}

/// The TorchScript traced through a harness (`model.` in front of every path), the ONNX
/// exported bare, and the other way round: the common root is found, every layer pairs.
#[test]
fn a_leading_level_only_one_side_has_is_a_common_root() {
    let x = [0.5, -1.0, 2.0];
    let (c1, r, c2) = ([1.0, -2.0, 4.0], [1.0, 0.0, 4.0], [2.0, 0.5, 1.0]);
    for (torch_root, onnx_root) in [("model.", ""), ("", "model.")] {
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let tc1 = t.op(
            "aten::_convolution",
            &format!("{torch_root}conv1"),
            &[ti],
            &c1,
        );
        let tr = t.op("aten::relu", &format!("{torch_root}act"), &[tc1], &r);
        let tc2 = t.op(
            "aten::_convolution",
            &format!("{torch_root}conv2"),
            &[tr],
            &c2,
        );
        t.output(0, tc2);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let oc1 = o.op("Conv", &format!("{onnx_root}conv1"), &[oi], &c1);
        let or = o.op("Relu", &format!("{onnx_root}act"), &[oc1], &r);
        let oc2 = o.op("Conv", &format!("{onnx_root}conv2"), &[or], &c2);
        o.output(0, oc2);
        let p = pair(&t.build(), &o.build()).unwrap();
        for (tv, ov) in [(tc1, oc1), (tr, or), (tc2, oc2)] {
            let got = pair_of(&p, tv).map(|q| (q.onnx, q.paired_by));
            assert_eq!(got, Some((ov, "module_output")), "{torch_root:?}");
        }
    }
}

/// A layer scale (`x * gamma`, gamma a parameter) after a block's last Conv, folded by a
/// simplifier into that Conv's weights: the Conv node computes the scaled value, and the
/// scale has no node. The Conv is compared with the scaled value, the conv fused into it.
#[test]
fn a_layer_scale_folded_into_the_conv_before_it_is_compared_after_the_scale() {
    let (t, o, [tc, tm, ta, oc, oa]) = graphs::layer_scale_folded_into_conv();
    let p = pair(&t, &o).unwrap();
    let scale = pair_of(&p, tm).expect("the scaled value is compared");
    assert_eq!(scale.onnx, oc);
    assert_eq!(scale.paired_by, "folded_affine");
    assert!(!scale.certain, "the values chose it");
    assert_eq!(scale.fused, vec![tc]);
    assert!(pair_of(&p, tc).is_none());
    assert_eq!(pair_of(&p, ta).unwrap().onnx, oa);
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

#[test]
fn a_factor_folded_into_the_reading_conv_is_covered_not_failed() {
    let (t, o, [_, tg, ..]) = graphs::gelu_scale_folded("Conv");
    let p = pair(&t, &o).unwrap();
    assert!(pair_of(&p, tg).is_none(), "twice the GELU is no twin of it");
    let u = p.unpaired.iter().find(|u| u.id == tg).unwrap();
    assert!(
        u.accounted
            && matches!(
                u.reason,
                UnpairedReason::FoldedScale {
                    factor: ScaleFactor::Scalar(_),
                    ..
                }
            ),
        "{:?}",
        u.reason
    );
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

/// A reader without weights could not have absorbed the factor: the pair stays, and fails.
#[test]
fn a_factor_no_reader_can_absorb_keeps_its_pair() {
    let (t, o, [_, tg, ..]) = graphs::gelu_scale_folded("Relu");
    let p = pair(&t, &o).unwrap();
    assert!(pair_of(&p, tg).is_some());
}

/// A grid sample (deformable attention's lookup) is exported as GridSample: the same op, so
/// it pairs by kind, and a wrong sampling mode is shown there, not at the next layer.
#[test]
fn a_grid_sampler_pairs_with_grid_sample_even_when_it_differs() {
    let x = [1.0, 2.0, 3.0, 4.0];
    let s = [1.5, 2.5, 3.5, 2.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tc = t.op("aten::_convolution", "conv", &[ti], &x);
    let tg = t.op("aten::grid_sampler", "", &[tc, ti], &s);
    let ta = t.op("aten::add", "", &[tg, ti], &x);
    t.output(0, ta);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oc = o.op("Conv", "conv", &[oi], &x);
    let og = o.op("GridSample", "", &[oc, oi], &[1.5, 2.5, 3.9, 2.0]);
    let oa = o.op("Add", "", &[og, oi], &x);
    o.output(0, oa);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, tg).map(|q| q.onnx), Some(og));
}

/// A simplifier folded an RMSNorm's weight into the MatMul that reads it: the norm's last
/// ONNX value is PyTorch's divided by the weight, channel by channel along the last dim.
#[test]
fn a_norm_weight_folded_into_the_reading_matmul_is_covered_not_failed() {
    let x = [1.0, -2.0, 3.0, -4.0, 0.5, 1.5, -2.5, 2.0];
    let weight = [0.5, 3.0];
    let unweighted = [0.4, -0.8, 1.2, -1.6, 0.2, 0.6, -1.0, 0.8];
    let normed: Vec<f32> = (0..8).map(|i| unweighted[i] * weight[i % 2]).collect();
    let fc = [0.25, 0.5, -0.75, 1.0, 0.1, 0.2, 0.3, 0.4];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tn = t.op("aten::mul", "norm", &[ti], &normed);
    let tf = t.op("aten::linear", "fc", &[tn], &fc);
    t.output(0, tf);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let on = o.op("Mul", "norm", &[oi], &unweighted);
    let of = o.op("MatMul", "fc", &[on], &fc);
    o.output(0, of);
    let (mut t, mut o) = (t.build(), o.build());
    for id in [tn, tf] {
        reshape(&mut t, id, &[4, 2]);
    }
    for id in [on, of] {
        reshape(&mut o, id, &[4, 2]);
    }
    let p = pair(&t, &o).unwrap();
    assert!(
        pair_of(&p, tn).is_none(),
        "the unweighted norm is no twin of it"
    );
    let u = p.unpaired.iter().find(|u| u.id == tn).unwrap();
    assert!(
        u.accounted
            && matches!(
                u.reason,
                UnpairedReason::FoldedScale {
                    factor: ScaleFactor::PerChannel,
                    ..
                }
            ),
        "{:?}",
        u.reason
    );
    assert_eq!(pair_of(&p, tf).unwrap().onnx, of);
}

#[test]
fn an_add_fused_into_a_skip_layer_norm_leaves_its_twin_to_the_add_it_computes() {
    // A block's two residual adds, `x + attn(x)` and `h + mlp(h)`; ONNX Runtime's extended
    // level fused the second into the next LayerNorm (a scope-less SkipLayerNormalization),
    // so the block keeps one Add. A planted fault in attn makes that Add's value closest to
    // the second add's, so the values choose it; the wiring says it is the first one's,
    // and the fault is then shown at attn and the add it feeds.
    let (t, o, ids) = graphs::residual_add_fused_into_norm();
    let [ta, first, _, _, second, tn, oa, oadd, _, _, fused] = ids;
    let p = pair(&t, &o).unwrap();

    let add = pair_of(&p, first).expect("the first residual add is paired");
    assert_eq!(add.onnx, oadd);
    assert_eq!(add.paired_by, "dataflow_owner");
    assert!(add.certain, "the wiring leaves no other choice");
    assert!(
        pair_of(&p, second).is_none(),
        "no ONNX node computes the fused add alone"
    );
    let fused_add = p.unpaired.iter().find(|u| u.id == second).unwrap();
    assert!(fused_add.accounted, "{:?}", fused_add.reason);
    assert_eq!(pair_of(&p, tn).unwrap().onnx, fused);
    assert_eq!(pair_of(&p, ta).unwrap().onnx, oa);
    assert!(p.layers.iter().all(|l| l.follows_dataflow));
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

#[test]
fn a_full_range_slice_is_an_alias_not_a_layer_that_takes_a_twin() {
    // attn views v and k, then indexes v with full ranges (`v[:, :]`, a slice that keeps
    // every element; the exporter emits nothing for it) and adds. The slice takes a place
    // in the order: it met k's Reshape, k's view met v's, and v's view lost its twin.
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let k = t.op("aten::linear", "attn.k_proj", &[ti], &[3.0, 4.0]);
    let v = t.op("aten::linear", "attn.v_proj", &[ti], &[5.0, 6.0]);
    let vv = t.op("aten::view", "attn", &[v], &[5.0, 6.0]);
    let kv = t.op("aten::view", "attn", &[k], &[3.0, 4.0]);
    let vs = t.op("aten::slice", "attn", &[vv], &[5.0, 6.0]);
    let sum = t.op("aten::add", "attn", &[kv, vs], &[8.0, 10.0]);
    t.output(0, sum);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let ok = o.op("Gemm", "attn.k_proj", &[oi], &[3.0, 4.0]);
    let ov = o.op("Gemm", "attn.v_proj", &[oi], &[5.0, 6.0]);
    let ovv = o.op("Reshape", "attn", &[ov], &[5.0, 6.0]);
    let okv = o.op("Reshape", "attn", &[ok], &[3.0, 4.0]);
    let osum = o.op("Add", "attn", &[okv, ovv], &[8.0, 10.0]);
    o.output(0, osum);
    let p = pair(&t.build(), &o.build()).unwrap();

    assert!(
        pair_of(&p, vs).is_none(),
        "a slice that keeps everything is not compared"
    );
    let alias = p.unpaired.iter().find(|u| u.id == vs).unwrap();
    assert!(
        alias.accounted && matches!(alias.reason, UnpairedReason::Identity { .. }),
        "{:?}",
        alias.reason
    );
    assert_eq!(pair_of(&p, vv).unwrap().onnx, ovv);
    assert_eq!(pair_of(&p, kv).unwrap().onnx, okv);
    assert_eq!(pair_of(&p, sum).unwrap().onnx, osum);
    assert!(p.layers.iter().all(|l| l.follows_dataflow));
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

#[test]
fn two_adds_that_read_the_same_producers_meet_their_one_onnx_add_by_value() {
    // BERT's embeddings add the token-type and then the position embeddings (both from
    // buffers, folded: neither is a layer), then LayerNorm; ONNX Runtime's extended level
    // fused the second add into a scope-less SkipLayerNormalization. Both adds read only
    // the word embedding's twin, so the wiring cannot tell them apart: the values choose.
    let x = [1.0, 2.0, 3.0, 4.0];
    let word = [2.0, 1.0, 4.0, 3.0];
    let first = [2.5, 1.5, 4.5, 3.5];
    let second = [3.0, 1.0, 5.0, 3.0];
    let norm = [0.0, -1.0, 1.0, 0.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tw = t.op("aten::linear", "emb.word", &[ti], &word);
    let a1 = t.op("aten::add", "emb", &[tw], &first);
    let a2 = t.op("aten::add", "emb", &[a1], &second);
    let tn = t.op("aten::layer_norm", "emb.norm", &[a2], &norm);
    t.output(0, tn);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let ow = o.op("Gemm", "emb.word", &[oi], &word);
    let oadd = o.op("Add", "emb", &[ow], &first);
    let fused = o.op("com.microsoft::SkipLayerNormalization", "", &[oadd], &norm);
    o.values[fused].scope_recorded = false;
    o.output(0, fused);
    let p = pair(&t.build(), &o.build()).unwrap();

    let add = pair_of(&p, a1).expect("the first add is paired");
    assert_eq!(add.onnx, oadd);
    assert!(!add.certain, "the values chose it");
    assert!(pair_of(&p, a2).is_none());
    assert_eq!(pair_of(&p, tn).unwrap().onnx, fused);
}

#[test]
fn a_chain_of_layout_ops_arranged_otherwise_is_unpaired_as_a_whole() {
    // A key's two layout ops before a matmul; ONNX did the same rearrangement with two
    // layout nodes in another order, so each pair holds other data while what the chain
    // reads and feeds agrees. Each wrong pair must not seem to confirm the other.
    let x = [1.0, 2.0, 3.0, 4.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let lin = t.op("aten::linear", "attn.key", &[ti], &x);
    let tr1 = t.op("aten::transpose", "attn", &[lin], &[1.0, 3.0, 2.0, 4.0]);
    let tr2 = t.op("aten::permute", "attn", &[tr1], &[4.0, 3.0, 2.0, 1.0]);
    let mm = t.op("aten::matmul", "attn", &[tr2], &[9.0, 8.0, 7.0, 6.0]);
    t.output(0, mm);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let olin = o.op("MatMul", "attn.key", &[oi], &x);
    let otr1 = o.op("Transpose", "attn", &[olin], &[2.0, 1.0, 4.0, 3.0]);
    let otr2 = o.op("Transpose", "attn", &[otr1], &[3.0, 4.0, 1.0, 2.0]);
    let omm = o.op("MatMul", "attn", &[otr2], &[9.0, 8.0, 7.0, 6.0]);
    o.output(0, omm);
    let p = pair(&t.build(), &o.build()).unwrap();
    for id in [tr1, tr2] {
        assert!(
            pair_of(&p, id).is_none(),
            "value {id} keeps a twin of other data"
        );
        let u = p.unpaired.iter().find(|u| u.id == id).unwrap();
        assert!(u.accounted, "{:?}", u.reason);
    }
    assert_eq!(pair_of(&p, mm).unwrap().onnx, omm);
    assert_eq!(pair_of(&p, lin).unwrap().onnx, olin);
}

/// A fused projection chunked into query and key, each feeding a chain of the same ops and
/// shapes, and an optimiser that runs the key's chain first: with the chunk's pieces
/// unpaired both chains' nearest paired producer is the projection, and the order pairs
/// their links crosswise though wiring allows it. The pieces pair with their Slices, and
/// every link then follows its own piece.
#[test]
fn the_pieces_of_a_chunk_pair_with_their_slices_and_uncross_the_chains_after_them() {
    let (t, o, ids) = graphs::chunked_projection();
    let [_, _, tq, tk, tqr, tkr, tqn, tkn, _, _, ok, okr, okn, oq, oqr, oqn] = ids;
    let p = pair(&t, &o).unwrap();
    for (tv, ov) in [(tq, oq), (tk, ok), (tqn, oqn), (tkn, okn)] {
        let made = pair_of(&p, tv).unwrap_or_else(|| panic!("value {tv} is compared"));
        assert_eq!(made.onnx, ov, "value {tv}");
    }
    for (tv, ov) in [(tqr, oqr), (tkr, okr)] {
        assert!(pair_of(&p, tv).is_none_or(|m| m.onnx == ov), "value {tv}");
    }
    assert_eq!(pair_of(&p, tq).unwrap().paired_by, "split_outputs");
}

/// A module's own list of results unpacks whole tensors, not pieces of one: the unpack stays
/// an identity even where a layout node of its shape follows its producer.
#[test]
fn an_unpack_of_whole_tensors_is_no_split_piece() {
    let (t, o, [_, tu, tr, _, _, orl]) = graphs::unpacked_whole_tensor();
    let p = pair(&t, &o).unwrap();
    assert!(pair_of(&p, tu).is_none());
    assert_eq!(pair_of(&p, tr).unwrap().onnx, orl);
}

/// The same layer scale folded into a Linear that a simplifier runs as a 2-D Gemm: the
/// Reshape restoring the leading dims holds the scaled value and is what the Linear pairs
/// with, so the scale is looked for behind it.
#[test]
fn a_layer_scale_folded_into_a_gemm_is_compared_at_the_reshape_after_it() {
    let x = [1.0, -2.0, 3.0, -4.0];
    let lin = [2.0, -1.0, 0.5, 3.0];
    let gamma = [0.5, 2.0, -1.0, 0.25];
    let scaled = [1.0, -2.0, -0.5, 0.75];
    let out = [2.0, -4.0, 2.5, -3.25];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tl = t.op("aten::linear", "b.o_proj", &[ti], &lin);
    let tg = t.op("aten::reshape", "b", &[], &gamma);
    let tm = t.op("aten::mul", "b", &[tl, tg], &scaled);
    let ta = t.op("aten::add", "b", &[tm, ti], &out);
    t.output(0, ta);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let og = o.op("Gemm", "b.o_proj", &[oi], &scaled);
    let or = o.op("Reshape", "b.o_proj", &[og], &scaled);
    let oa = o.op("Add", "b", &[or, oi], &out);
    o.output(0, oa);
    let p = pair(&t.build(), &o.build()).unwrap();
    let scale = pair_of(&p, tm).expect("the scaled value is compared");
    assert_eq!(scale.onnx, or);
    assert_eq!(scale.paired_by, "folded_affine");
    assert_eq!(scale.fused, vec![tl]);
    assert!(pair_of(&p, tl).is_none());
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

/// A transpose moved below the elementwise op after it (ONNX Runtime's transpose optimiser
/// computes `transpose(q * 2)` for `transpose(q) * 2`), for a query and a key alike: the
/// ONNX Mul has the other layout's shape, and the value of the TorchScript `mul` is held by
/// the Transpose after it. Each `mul` pairs with its own chain's Transpose, by its values.
#[test]
fn an_op_a_transpose_was_moved_below_pairs_with_that_transpose() {
    let (t, o, ids) = graphs::transposes_moved_below_muls(2.0);
    let [_, _, tqt, tkt, tqm, tkm, _, _, _, okmt, okt, _, oqmt, oqt] = ids;
    let p = pair(&t, &o).unwrap();
    for (tv, ov) in [(tqt, oqt), (tkt, okt), (tqm, oqmt), (tkm, okmt)] {
        let made = pair_of(&p, tv).unwrap_or_else(|| panic!("value {tv} is compared"));
        assert_eq!(made.onnx, ov, "value {tv}");
    }
    assert!(
        [tqm, tkm]
            .iter()
            .any(|&v| pair_of(&p, v).unwrap().paired_by == "agreeing_twins"),
        "the moved transposes are found by their values"
    );
}

/// A simplifier merged the query and key projections, which read one input, into one
/// scope-less MatMul and a Split: no ONNX node carries either Linear's scope, and each
/// Linear's output is one piece of the Split.
#[test]
fn projections_merged_into_one_matmul_pair_with_the_pieces_of_its_split() {
    let x = [1.0, 2.0];
    let (q, k) = ([3.0, -1.0], [0.5, 4.0]);
    let qk = [3.0, -1.0, 0.5, 4.0];
    let sum = [3.5, 3.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tq = t.op("aten::linear", "attn.q", &[ti], &q);
    let tk = t.op("aten::linear", "attn.k", &[ti], &k);
    let ta = t.op("aten::add", "attn", &[tq, tk], &sum);
    t.output(0, ta);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let om = o.op("MatMul", "", &[oi], &qk);
    let oq = o.op("Split", "", &[om], &q);
    let ok = o.op("Split", "", &[om], &k);
    let oa = o.op("Add", "attn", &[oq, ok], &sum);
    o.output(0, oa);
    let mut oc = o.build();
    for id in [om, oq, ok] {
        oc.values[id].scope_recorded = false;
    }
    let p = pair(&t.build(), &oc).unwrap();
    for (tv, ov) in [(tq, oq), (tk, ok), (ta, oa)] {
        let made = pair_of(&p, tv).unwrap_or_else(|| panic!("value {tv} is compared"));
        assert_eq!(made.onnx, ov, "value {tv}");
    }
    assert_eq!(pair_of(&p, tq).unwrap().paired_by, "scopeless");
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

/// An attention whose key transpose ONNX merged with the one inside the attention op: order
/// and shape pair the TorchScript `transpose` with an ONNX Transpose holding the key in the
/// other arrangement. `value` scales the ONNX value projection (1.0: clean; 1.09: a planted
/// fault, which makes the attention output disagree too). Returns the pairing and the
/// TorchScript ids of the key transpose, the value projection and the attention output.
fn merged_key_transpose(value: f32) -> (Pairing, usize, usize, usize) {
    let x = [1.0, -2.0, 3.0, 0.5];
    let key = [0.3, -1.2, 2.0, 0.7];
    let key_t = [0.3, 2.0, -1.2, 0.7]; // the 2x2 key with its axes swapped
    let v = [1.5, -0.4, 0.9, -2.2];
    let attn = [0.8, -0.6, 1.1, -1.4];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tk = t.op("aten::linear", "attn.key", &[ti], &key);
    let tt = t.op("aten::transpose", "attn", &[tk], &key);
    let tv = t.op("aten::linear", "attn.value", &[ti], &v);
    let ta = t.op(
        "aten::scaled_dot_product_attention",
        "attn",
        &[tt, tv],
        &attn,
    );
    t.output(0, ta);
    let scaled = |d: &[f32]| d.iter().map(|x| x * value).collect::<Vec<_>>();
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let ok = o.op("MatMul", "attn.key", &[oi], &key);
    let ot = o.op("Transpose", "attn", &[ok], &key_t);
    let ov = o.op("MatMul", "attn.value", &[oi], &scaled(&v));
    let oa = o.op("MatMul", "attn", &[ot, ov], &scaled(&attn));
    o.output(0, oa);
    (pair(&t.build(), &o.build()).unwrap(), tt, tv, ta)
}

#[test]
fn a_merged_transpose_stays_unpaired_when_a_fault_follows_it() {
    // Clean, the consumers agree: the transpose is relaid, as before.
    let (clean, tt, _, _) = merged_key_transpose(1.0);
    assert!(pair_of(&clean, tt).is_none());
    // A faulted value projection makes the attention disagree; the transpose still holds
    // the key's own values, so it is no divergence of its own, and the first failing
    // pair is the faulted projection.
    let (faulted, tt, tv, ta) = merged_key_transpose(1.09);
    assert!(
        pair_of(&faulted, tt).is_none(),
        "the merged transpose was compared"
    );
    let note = faulted
        .unpaired
        .iter()
        .find(|u| u.side == Side::Torch && u.id == tt)
        .expect("a reason for the transpose");
    assert!(note.accounted, "{:?}", note.reason);
    assert!(pair_of(&faulted, tv).is_some() && pair_of(&faulted, ta).is_some());
}

#[test]
fn a_layout_twin_with_other_values_stays_paired_though_its_reader_nearly_agrees() {
    // An attention module whose output is a transpose (batch first again), faulted inside
    // (its twin's values 5% off), read by a residual add that dilutes the fault to under 1%
    // of its range: the add's near agreement does not make the fault an arrangement.
    let (t, o, [_, tt, _, _, _, ot, _, _]) = graphs::faulted_transpose_nearly_agreeing_reader();
    let p = pair(&t, &o).unwrap();
    assert!(pair_of(&p, tt).is_some_and(|l| l.onnx == ot));
}

/// A radix softmax module (view, softmax, closing reshape) whose closing reshape a
/// simplifier merged with the parent's next reshape: no ONNX value of the call has the
/// module output's shape, so the call is compared at its softmax, which has its twin.
#[test]
fn a_module_whose_closing_reshape_was_merged_is_compared_at_its_last_computing_op() {
    let x = [1.0, -2.0, 3.0, 0.5, 0.25, -1.0, 2.0, 1.5];
    let soft = [0.1, 0.2, 0.3, 0.4, 0.05, 0.15, 0.35, 0.45];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tv = t.op("aten::view", "blk.rsoftmax", &[ti], &x);
    let ts = t.op("aten::softmax", "blk.rsoftmax", &[tv], &soft);
    let tr = t.op("aten::reshape", "blk.rsoftmax", &[ts], &soft);
    let tm = t.op("aten::mul", "blk", &[ti, tr], &soft);
    t.output(0, tm);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let ov = o.op("Reshape", "blk.rsoftmax", &[oi], &x);
    let os = o.op("Softmax", "blk.rsoftmax", &[ov], &soft);
    let or = o.op("Reshape", "blk.rsoftmax", &[os], &soft);
    let om = o.op("Mul", "blk", &[oi, or], &soft);
    o.output(0, om);
    let (mut t, mut o) = (t.build(), o.build());
    for id in [tv, ts] {
        t.values[id].shape = vec![2, 4];
    }
    for id in [ov, os] {
        o.values[id].shape = vec![2, 4];
    }
    t.values[tr].shape = vec![8];
    o.values[or].shape = vec![2, 4, 1, 1];
    t.values[tm].shape = vec![2, 4, 1, 1];
    o.values[om].shape = vec![2, 4, 1, 1];
    let p = pair(&t, &o).unwrap();
    assert!(
        pair_of(&p, ts).is_some_and(|l| l.onnx == os),
        "{:?}",
        p.layers
    );
}

/// One module instance held by a block under another attribute than the one it was first
/// registered under (CoaT's `self.cpe1`, handed to each serial block as `block.cpe`):
/// TorchScript names the call `b.cpe`, the legacy exporter `b.cpe1`. The call pairs as the
/// module's own; with two modules of `b` that ONNX never names, which one `cpe1` is cannot be
/// told, and nothing is guessed.
#[test]
fn a_shared_instance_named_by_its_first_attribute_pairs_with_the_call() {
    let x = [0.5, -1.0, 2.0];
    let (c, f) = ([1.0, -2.0, 4.0], [2.0, 0.5, 1.0]);
    for second_unnamed in [false, true] {
        let mut t = Builder::new(Side::Torch);
        let ti = t.input(0, &x);
        let tc = t.op("aten::_convolution", "b.cpe", &[ti], &c);
        let mut last = tc;
        if second_unnamed {
            last = t.op("aten::relu", "b.act", &[tc], &c);
        }
        let tf = t.op("aten::linear", "b.fc", &[last], &f);
        t.output(0, tf);
        let mut o = Builder::new(Side::Onnx);
        let oi = o.input(0, &x);
        let oc = o.op("Conv", "b.cpe1", &[oi], &c);
        let of = o.op("Gemm", "b.fc", &[oc], &f);
        o.output(0, of);
        let p = pair(&t.build(), &o.build()).unwrap();
        assert_eq!(
            pair_of(&p, tf).map(|q| (q.onnx, q.paired_by)),
            Some((of, "module_output"))
        );
        let conv = pair_of(&p, tc).map(|q| (q.onnx, q.paired_by));
        if second_unnamed {
            assert_ne!(conv, Some((oc, "module_output")));
        } else {
            assert_eq!(conv, Some((oc, "module_output")));
        }
    }
}

/// Sets a value's scope to the given levels (the call chain libtorch records, which skips
/// a module that was not called through `Module.__call__`).
fn rescope(c: &mut Capture, id: usize, paths: &[&str]) {
    c.values[id].scope = paths
        .iter()
        .map(|p| ScopeLevel {
            path: p.to_string(),
            class: String::new(),
        })
        .collect();
}

/// A block run as `layer.forward(x)` (SqueezeBERT's encoder) is called through no
/// `Module.__call__`: libtorch's call chain goes `e` -> `e.l.0.a` -> `e.l.0.a.q`, and the
/// legacy exporter names the nodes by the unqualified names of that chain, numbering the
/// repeats: `/e/a/q/Conv`, then `/e/a/q_1/Conv` and `/e/a_1/Mul` for the second layer. Each
/// layer's calls pair with their own nodes, not with the first layer's or none.
#[test]
fn a_block_called_without_its_scope_pairs_by_the_exporters_names() {
    let x = [0.5, -1.0, 2.0];
    let (q0, a0, q1, a1) = (
        [1.0, 2.0, 3.0],
        [2.0, 4.0, 6.0],
        [3.0, 1.0, 2.0],
        [9.0, 3.0, 6.0],
    );
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tq0 = t.op("aten::_convolution", "q0", &[ti], &q0);
    let ta0 = t.op("aten::mul", "a0", &[tq0], &a0);
    let tq1 = t.op("aten::_convolution", "q1", &[ta0], &q1);
    let ta1 = t.op("aten::mul", "a1", &[tq1], &a1);
    t.output(0, ta1);
    let mut t = t.build();
    for (id, layer, leaf) in [
        (tq0, 0, true),
        (ta0, 0, false),
        (tq1, 1, true),
        (ta1, 1, false),
    ] {
        let attention = format!("e.l.{layer}.a");
        let query = format!("{attention}.q");
        let mut chain = vec!["e", attention.as_str()];
        if leaf {
            chain.push(&query);
        }
        rescope(&mut t, id, &chain);
    }
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oq0 = o.op("Conv", "e.a.q", &[oi], &q0);
    let oa0 = o.op("Mul", "e.a", &[oq0], &a0);
    let oq1 = o.op("Conv", "e.a.q_1", &[oa0], &q1);
    let oa1 = o.op("Mul", "e.a_1", &[oq1], &a1);
    o.output(0, oa1);
    let p = pair(&t, &o.build()).unwrap();
    for (torch, onnx) in [(tq0, oq0), (ta0, oa0), (tq1, oq1), (ta1, oa1)] {
        assert_eq!(
            pair_of(&p, torch).map(|q| q.onnx),
            Some(onnx),
            "{:?}",
            p.layers
        );
    }
    assert_eq!(pair_of(&p, tq1).unwrap().paired_by, "module_output");
}

/// A shared instance's sibling that computes nothing (a Dropout, which leaves no ONNX node)
/// is no second candidate: the legacy name `crpe1` is still read as `b.crpe`.
#[test]
fn a_vanishing_sibling_does_not_make_a_shared_instance_ambiguous() {
    let x = [0.5, -1.0, 2.0];
    let (c, f) = ([1.0, -2.0, 4.0], [2.0, 0.5, 1.0]);
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tc = t.op("aten::_convolution", "b.crpe", &[ti], &c);
    let td = t.op("aten::dropout", "b.drop", &[tc], &c);
    let tf = t.op("aten::linear", "b.fc", &[td], &f);
    t.output(0, tf);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oc = o.op("Conv", "b.crpe1", &[oi], &c);
    let of = o.op("Gemm", "b.fc", &[oc], &f);
    o.output(0, of);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(
        pair_of(&p, tc).map(|q| (q.onnx, q.paired_by)),
        Some((oc, "module_output"))
    );
}

/// A shared instance also called from the top level (CoaT's `self.cpe2(x2)` after the
/// serial blocks): `torch.jit.trace` records that call under the instance's last attribute
/// path (`b.cpe`) straight from the root, the legacy exporter as `/cpe1/...`, its first
/// name under the caller. The name read under the block says which module it is, and the
/// top-level call pairs as that module's second call.
#[test]
fn a_shared_instance_called_from_the_top_level_pairs_with_its_legacy_name() {
    let x = [0.5, -1.0, 2.0];
    let (c1, c2, f) = ([1.0, -2.0, 4.0], [3.0, 1.0, -1.0], [2.0, 0.5, 1.0]);
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tc1 = t.op("aten::_convolution", "b.cpe", &[ti], &c1);
    let tf = t.op("aten::linear", "b.fc", &[tc1], &f);
    let tc2 = t.op("aten::_convolution", "b.cpe", &[tf], &c2);
    let tr = t.op("aten::relu", "", &[tc2], &c2);
    t.output(0, tr);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oc1 = o.op("Conv", "b.cpe1", &[oi], &c1);
    let of = o.op("Gemm", "b.fc", &[oc1], &f);
    let oc2 = o.op("Conv", "cpe1", &[of], &c2);
    let or = o.op("Relu", "", &[oc2], &c2);
    o.output(0, or);
    let mut t = t.build();
    // The top-level call's scope is the one level TorchScript records.
    t.values[tc2].scope.remove(0);
    let p = pair(&t, &o.build()).unwrap();
    assert_eq!(
        pair_of(&p, tc1).map(|q| (q.onnx, q.paired_by)),
        Some((oc1, "module_output"))
    );
    assert_eq!(
        pair_of(&p, tc2).map(|q| (q.onnx, q.paired_by)),
        Some((oc2, "module_output"))
    );
}

/// A simplifier renamed the block's Linears (their nodes lost the block's scope), so the
/// block has three children ONNX never names. The legacy name `crpe1` holds a `conv` like
/// only one of them: it is that one.
#[test]
fn the_modules_inside_an_unknown_name_say_which_child_it_is() {
    let x = [0.5, -1.0, 2.0];
    let (q, c, f) = ([1.0, 1.0, 2.0], [1.0, -2.0, 4.0], [2.0, 0.5, 1.0]);
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tq = t.op("aten::linear", "b.qkv", &[ti], &q);
    let tc = t.op("aten::_convolution", "b.crpe.conv", &[tq], &c);
    let tf = t.op("aten::linear", "b.proj", &[tc], &f);
    t.output(0, tf);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oq = o.op("Gemm", "", &[oi], &q);
    let oc = o.op("Conv", "b.crpe1.conv", &[oq], &c);
    let of = o.op("Gemm", "", &[oc], &f);
    o.output(0, of);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(
        pair_of(&p, tc).map(|q| (q.onnx, q.paired_by)),
        Some((oc, "module_output"))
    );
}

#[test]
fn a_division_by_one_is_an_alias_not_a_layer_that_takes_the_next_mul() {
    // A box decoder divides its deltas by unit weights (`rel / 1.0`) and multiplies by the
    // anchors' widths; ONNX Runtime dropped the Div by 1. Left in the order, the div met the
    // Mul and failed by the widths' factor, and the mul lost its twin.
    let x = [1.0, 2.0, 3.0, 4.0];
    let widths = [2.0, 2.0, 3.0, 3.0];
    let prod = [4.0, 8.0, 18.0, 24.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let rel = t.op(
        "aten::_convolution",
        "head.conv",
        &[ti],
        &[2.0, 4.0, 6.0, 8.0],
    );
    let w = t.op("aten::_convolution", "head.width", &[ti], &widths);
    let div = t.op("aten::div", "", &[rel], &[2.0, 4.0, 6.0, 8.0]);
    let mul = t.op("aten::mul", "", &[div, w], &prod);
    let half = t.op("aten::mul", "", &[mul], &[2.0, 4.0, 9.0, 12.0]);
    t.output(0, half);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let orel = o.op("Conv", "head.conv", &[oi], &[2.0, 4.0, 6.0, 8.0]);
    let ow = o.op("Conv", "head.width", &[oi], &widths);
    let omul = o.op("Mul", "", &[orel, ow], &prod);
    let ohalf = o.op("Mul", "", &[omul], &[2.0, 4.0, 9.0, 12.0]);
    o.output(0, ohalf);
    let p = pair(&t.build(), &o.build()).unwrap();

    assert!(pair_of(&p, div).is_none(), "x / 1 computes nothing");
    let alias = p.unpaired.iter().find(|u| u.id == div).unwrap();
    assert!(
        alias.accounted && matches!(alias.reason, UnpairedReason::Identity { .. }),
        "{:?}",
        alias.reason
    );
    assert_eq!(pair_of(&p, mul).unwrap().onnx, omul);
    assert_eq!(pair_of(&p, half).unwrap().onnx, ohalf);
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

#[test]
fn an_op_of_two_computed_values_that_changes_nothing_is_still_a_layer() {
    // A mask of zeros added to scores changes nothing on this input, but it is computed
    // from the input: a real Add, paired and compared.
    let x = [1.0, 2.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let scores = t.op("aten::linear", "attn.q", &[ti], &[3.0, 4.0]);
    let mask = t.op("aten::linear", "attn.mask", &[ti], &[0.0, 0.0]);
    let add = t.op("aten::add", "attn", &[scores, mask], &[3.0, 4.0]);
    t.output(0, add);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let os = o.op("Gemm", "attn.q", &[oi], &[3.0, 4.0]);
    let om = o.op("Gemm", "attn.mask", &[oi], &[0.0, 0.0]);
    let oadd = o.op("Add", "attn", &[os, om], &[3.0, 4.0]);
    o.output(0, oadd);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, add).unwrap().onnx, oadd);
}

#[test]
fn a_computation_a_simplifier_merged_into_another_module_is_covered_not_misplaced() {
    // A RoI pooler takes `boxes[:, 2] - boxes[:, 0]` for the box areas; the box decoder
    // after it takes the same difference of the same boxes for the widths. The simplifier
    // merged the two: one Sub, in the pooler's scope, read by the decoder's Unsqueeze.
    let (t, o, ids) = graphs::difference_merged_across_modules();
    let [_, _, _, area, r0, r2, rw, un, m, .., oarea, oun, om] = ids;
    let p = pair(&t, &o).unwrap();

    for (id, original) in [(r0, "v1"), (r2, "v2"), (rw, "v3")] {
        assert!(pair_of(&p, id).is_none(), "value {id} is the pooler's");
        let u = p.unpaired.iter().find(|u| u.id == id).unwrap();
        assert!(
            u.accounted
                && u.reason
                    == UnpairedReason::Duplicate {
                        original: original.to_string()
                    },
            "{:?}",
            u.reason
        );
    }
    assert_eq!(pair_of(&p, area).unwrap().onnx, oarea);
    assert_eq!(pair_of(&p, un).unwrap().onnx, oun);
    assert_eq!(pair_of(&p, m).unwrap().onnx, om);
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

#[test]
fn the_same_op_on_the_same_input_that_computes_otherwise_is_a_layer() {
    // Two modules select from the same boxes, other columns: the same op on the same input,
    // different values. Neither is an alias of the other; both are compared.
    let boxes = [1.0, 2.0, 3.0, 5.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &boxes);
    let a = t.op("aten::select", "a", &[ti], &[1.0, 2.0]);
    let b = t.op("aten::select", "b", &[ti], &[3.0, 5.0]);
    let s = t.op("aten::add", "", &[a, b], &[4.0, 7.0]);
    t.output(0, s);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &boxes);
    let oa = o.op("Gather", "a", &[oi], &[1.0, 2.0]);
    let ob = o.op("Gather", "b", &[oi], &[3.0, 5.0]);
    let os = o.op("Add", "", &[oa, ob], &[4.0, 7.0]);
    o.output(0, os);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, a).unwrap().onnx, oa);
    assert_eq!(pair_of(&p, b).unwrap().onnx, ob);
    assert_eq!(pair_of(&p, s).unwrap().onnx, os);
}

/// A leaf module computing `view, addmm, view` (GPT-2's Conv1D), whose closing view pairs
/// with its closing Reshape, while the addmm inside it is not compared. `swap` exchanges
/// two output channels of the ONNX Gemm (a planted fault): the closing view's twin then holds
/// the same values in another order. Returns the pairing and the closing view's and Reshape's ids.
fn leaf_projection(swap: bool) -> (Pairing, usize, usize) {
    let x = [1.0, -2.0, 3.0, 0.5];
    let y = [0.4, -1.5, 2.5, 0.9];
    let swapped = [-1.5, 0.4, 0.9, 2.5];
    let out: &[f32] = if swap { &swapped } else { &y };
    let sum = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(p, q)| p + q).collect::<Vec<_>>();
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tf = t.op("aten::view", "mlp.c_proj", &[ti], &x);
    let tm = t.op("aten::addmm", "mlp.c_proj", &[tf], &y);
    let tv = t.op("aten::view", "mlp.c_proj", &[tm], &y);
    let ta = t.op("aten::add", "", &[ti, tv], &sum(&x, &y));
    t.output(0, ta);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let of = o.op("Reshape", "mlp.c_proj", &[oi], &x);
    let om = o.op("Gemm", "mlp.c_proj", &[of], out);
    let ov = o.op("Reshape", "mlp.c_proj", &[om], out);
    let oa = o.op("Add", "", &[oi, ov], &sum(&x, out));
    o.output(0, oa);
    (pair(&t.build(), &o.build()).unwrap(), tv, ov)
}

#[test]
fn a_channel_swap_inside_a_module_is_not_taken_for_a_relaid_layout() {
    // The proof that a layout pair differs by arrangement only is that agreeing producers
    // hand it its data; an uncompared addmm between them computes, and may be the fault.
    let (clean, tv, ov) = leaf_projection(false);
    assert!(pair_of(&clean, tv).is_some_and(|made| made.onnx == ov));
    let (faulted, tv, ov) = leaf_projection(true);
    let made = pair_of(&faulted, tv).expect("the module output stays compared");
    assert_eq!(made.onnx, ov, "with its closing Reshape");
}

#[test]
fn a_division_by_a_size_computed_one_is_an_alias() {
    // `2 * x / (w - 1)` over a feature map two pixels wide: the divisor is shape arithmetic
    // (an int64 scalar computed from `aten::size`), 1 here, and the simplifier dropped the
    // Div. Left in the order, the div met the next Mul of its shape and failed.
    let x = [1.0, 2.0, 3.0, 4.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let conv = t.op(
        "aten::_convolution",
        "head.conv",
        &[ti],
        &[2.0, 4.0, 6.0, 8.0],
    );
    let size = t.op("aten::sub", "", &[], &[1.0]);
    let div = t.op("aten::div", "", &[conv, size], &[2.0, 4.0, 6.0, 8.0]);
    let mul = t.op("aten::mul", "", &[div], &[4.0, 8.0, 12.0, 16.0]);
    t.output(0, mul);
    let mut torch = t.build();
    torch.values[size].dtype = DType::I64;
    torch.values[size].shape = vec![];
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oconv = o.op("Conv", "head.conv", &[oi], &[2.0, 4.0, 6.0, 8.0]);
    let omul = o.op("Mul", "", &[oconv], &[4.0, 8.0, 12.0, 16.0]);
    o.output(0, omul);
    let p = pair(&torch, &o.build()).unwrap();

    assert!(
        pair_of(&p, div).is_none(),
        "x / (w - 1) with w = 2 computes nothing"
    );
    let alias = p.unpaired.iter().find(|u| u.id == div).unwrap();
    assert!(
        alias.accounted && matches!(alias.reason, UnpairedReason::Identity { .. }),
        "{:?}",
        alias.reason
    );
    assert_eq!(pair_of(&p, mul).unwrap().onnx, omul);
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

#[test]
fn a_functional_activation_fused_into_its_conv_is_compared_there() {
    // A ConvGRU applies `torch.tanh` to its candidate conv (a functional op of the GRU, not
    // a module); ONNX Runtime's extended level fuses the two into one FusedConv in the conv's
    // scope. The node computes the tanh: compared with the conv it failed at 0.7 of range,
    // and the order gave the tanh the GRU's next Mul.
    let x = [0.5, -1.0, 2.0, -3.0];
    let conv = [1.0, -2.0, 0.5, -0.25];
    let tanh: Vec<f32> = conv.iter().map(|v: &f32| v.tanh()).collect();
    let out: Vec<f32> = tanh.iter().zip(&x).map(|(a, b)| a * b).collect();
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tc = t.op("aten::_convolution", "gru.convq", &[ti], &conv);
    let tt = t.op("aten::tanh", "gru", &[tc], &tanh);
    let tm = t.op("aten::mul", "gru", &[tt, ti], &out);
    t.output(0, tm);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let of = o.op("com.microsoft::FusedConv", "gru.convq", &[oi], &tanh);
    let om = o.op("Mul", "gru", &[of, oi], &out);
    o.output(0, om);
    let p = pair(&t.build(), &o.build()).unwrap();

    let fused = pair_of(&p, tt).expect("the tanh is compared");
    assert_eq!(fused.onnx, of);
    assert_eq!(fused.paired_by, "fusion");
    assert_eq!(fused.fused, vec![tc]);
    assert!(pair_of(&p, tc).is_none());
    assert_eq!(pair_of(&p, tm).unwrap().onnx, om);
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

#[test]
fn an_op_output_onnx_holds_only_with_its_axes_permuted_is_covered_not_compared() {
    let (t, o, [tl, _, tf, ..]) = graphs::lstm_output_rearranged(&seq_first(&LSTM_OUT));
    let clean = pair(&t, &o).unwrap();
    assert!(
        pair_of(&clean, tl).is_none(),
        "the lstm was compared with its rearranged output"
    );
    let note = clean
        .unpaired
        .iter()
        .find(|u| u.side == Side::Torch && u.id == tl)
        .expect("a reason for the lstm");
    assert!(note.accounted, "{:?}", note.reason);
    assert!(pair_of(&clean, tf).is_some());
    // A fault in the LSTM changes its values, not only their layout: it stays compared.
    let scaled: Vec<f32> = seq_first(&LSTM_OUT).iter().map(|v| v * 1.05).collect();
    let (t, o, [tl, _, _, _, or, _]) = graphs::lstm_output_rearranged(&scaled);
    let faulted = pair(&t, &o).unwrap();
    assert_eq!(pair_of(&faulted, tl).map(|made| made.onnx), Some(or));
}

#[test]
fn an_op_output_with_two_channels_swapped_is_not_taken_for_a_relayout() {
    // Hidden channels 0 and 1 exchanged before the relayout: the held value has the op's
    // values in another order, but no permutation of whole axes gives it.
    let mut swapped = LSTM_OUT;
    for row in swapped.chunks_mut(3) {
        row.swap(0, 1);
    }
    let (t, o, [tl, _, _, _, or, _]) = graphs::lstm_output_rearranged(&seq_first(&swapped));
    let faulted = pair(&t, &o).unwrap();
    assert_eq!(pair_of(&faulted, tl).map(|made| made.onnx), Some(or));
}

/// Each level of a pooled pyramid (level 1 pooled from level 0, level 2 from level 1) is
/// sampled by one `grid_sample`, and the saved ONNX graph runs the samples in the reverse
/// order. The order pairs the level-0 sample with the GridSample of level 2, which is still
/// computed from level 0 (through the pooling), so ancestry alone keeps it; its nearest
/// paired producer is level 2, not level 0, and the pair moves to the GridSample that reads
/// level 0 directly.
#[test]
fn samples_of_a_pyramid_run_in_reverse_pair_with_the_level_they_read() {
    let x = [1.0, 2.0, 3.0, 4.0];
    let levels = [
        [1.0, 1.0, 2.0, 2.0],
        [0.5, 0.5, 1.0, 1.0],
        [0.2, 0.2, 0.4, 0.4],
    ];
    let samples = [
        [5.0, 6.0, 7.0, 8.0],
        [1.0, 0.0, 1.0, 0.0],
        [0.1, 0.3, 0.1, 0.3],
    ];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tl0 = t.op("aten::_convolution", "conv", &[ti], &levels[0]);
    let tl1 = t.op("aten::avg_pool2d", "", &[tl0], &levels[1]);
    let tl2 = t.op("aten::avg_pool2d", "", &[tl1], &levels[2]);
    let ts: Vec<usize> = [tl0, tl1, tl2]
        .iter()
        .zip(&samples)
        .map(|(&l, s)| t.op("aten::grid_sampler", "", &[l, ti], s))
        .collect();
    let tsum = t.op("aten::add", "", &[ts[0], ts[1]], &[6.0, 6.0, 8.0, 8.0]);
    let tsum2 = t.op("aten::add", "", &[tsum, ts[2]], &[6.1, 6.3, 8.1, 8.3]);
    t.output(0, tsum2);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let ol0 = o.op("Conv", "conv", &[oi], &levels[0]);
    let ol1 = o.op("AveragePool", "", &[ol0], &levels[1]);
    let ol2 = o.op("AveragePool", "", &[ol1], &levels[2]);
    let os2 = o.op("GridSample", "", &[ol2, oi], &samples[2]);
    let os1 = o.op("GridSample", "", &[ol1, oi], &samples[1]);
    let os0 = o.op("GridSample", "", &[ol0, oi], &samples[0]);
    let osum = o.op("Add", "", &[os0, os1], &[6.0, 6.0, 8.0, 8.0]);
    let osum2 = o.op("Add", "", &[osum, os2], &[6.1, 6.3, 8.1, 8.3]);
    o.output(0, osum2);
    let p = pair(&t.build(), &o.build()).unwrap();
    for (tv, ov) in [(ts[0], os0), (ts[1], os1), (ts[2], os2), (tsum, osum)] {
        let made = pair_of(&p, tv).unwrap_or_else(|| panic!("value {tv} is compared"));
        assert_eq!(made.onnx, ov, "value {tv}");
        assert!(made.follows_dataflow, "value {tv}");
    }
}

/// `boxes[:, 2] - boxes[:, 0]` and `boxes[:, 3] - boxes[:, 1]`, which ONNX Runtime's saved
/// graph runs height first, on boxes that already differ by 10% (a top-k tie upstream chose
/// other boxes): the order crosses the selects, and no assignment matches their values
/// closely. The column each one takes of its own side's boxes tells them apart, and the
/// subtractions then follow the dataflow.
#[test]
fn crossed_selects_of_one_input_pair_by_the_column_they_take() {
    let boxes = [1.0, 2.0, 5.0, 7.0, 2.0, 3.0, 8.0, 6.0, 0.0, 1.0, 4.0, 9.0];
    let onnx_boxes: Vec<f32> = boxes.iter().map(|v| v * 1.1).collect();
    let column = |b: &[f32], c: usize| (0..3).map(|r| b[r * 4 + c]).collect::<Vec<f32>>();
    let diff = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x - y).collect::<Vec<f32>>();
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &boxes);
    let tb = t.op("aten::mul", "", &[ti], &boxes);
    let tcol: Vec<Vec<f32>> = (0..4).map(|c| column(&boxes, c)).collect();
    let ts2 = t.op("aten::select", "", &[tb], &tcol[2]);
    let ts0 = t.op("aten::select", "", &[tb], &tcol[0]);
    let tw = t.op("aten::sub", "", &[ts2, ts0], &diff(&tcol[2], &tcol[0]));
    let ts3 = t.op("aten::select", "", &[tb], &tcol[3]);
    let ts1 = t.op("aten::select", "", &[tb], &tcol[1]);
    let th = t.op("aten::sub", "", &[ts3, ts1], &diff(&tcol[3], &tcol[1]));
    let tcat: Vec<f32> = [diff(&tcol[2], &tcol[0]), diff(&tcol[3], &tcol[1])].concat();
    let tc = t.op("aten::cat", "", &[tw, th], &tcat);
    t.output(0, tc);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &boxes);
    let ob = o.op("Mul", "", &[oi], &onnx_boxes);
    let ocol: Vec<Vec<f32>> = (0..4).map(|c| column(&onnx_boxes, c)).collect();
    let og1 = o.op("Gather", "", &[ob], &ocol[1]);
    let og3 = o.op("Gather", "", &[ob], &ocol[3]);
    let oh = o.op("Sub", "", &[og3, og1], &diff(&ocol[3], &ocol[1]));
    let og0 = o.op("Gather", "", &[ob], &ocol[0]);
    let og2 = o.op("Gather", "", &[ob], &ocol[2]);
    let ow = o.op("Sub", "", &[og2, og0], &diff(&ocol[2], &ocol[0]));
    let ocat: Vec<f32> = [diff(&ocol[2], &ocol[0]), diff(&ocol[3], &ocol[1])].concat();
    let oc = o.op("Concat", "", &[ow, oh], &ocat);
    o.output(0, oc);
    let (mut tcap, mut ocap) = (t.build(), o.build());
    reshape(&mut tcap, tb, &[3, 4]);
    reshape(&mut ocap, ob, &[3, 4]);
    let p = pair(&tcap, &ocap).unwrap();
    for (tv, ov) in [
        (ts2, og2),
        (ts0, og0),
        (ts3, og3),
        (ts1, og1),
        (tw, ow),
        (th, oh),
    ] {
        let made = pair_of(&p, tv).unwrap_or_else(|| panic!("value {tv} is compared"));
        assert_eq!(made.onnx, ov, "value {tv}");
        assert!(made.follows_dataflow, "value {tv}");
    }
}

/// ONNX Runtime's transpose optimiser moved a key's Transpose below its rotary arithmetic
/// (`mul`, then `add`): ONNX computes both on the untransposed key ([2, 3]) and transposes
/// after the add, so no ONNX value holds the mul in TorchScript's layout ([3, 2]), and the
/// order met the attention's scaled query (another Mul of that shape), which fails at every
/// element. The mul is covered (its ONNX value holds its values with the dims exchanged), not
/// a failing pair; the add is compared where the layout is restored; and the transpose before
/// the chain, met by shape with the moved Transpose, is settled as relaid.
#[test]
fn an_op_onnx_runs_in_another_layout_is_covered_not_paired_by_shape() {
    let (t, o, ids) = graphs::op_in_another_layout(2.0);
    let [_, tr, mul, _, mm, .., omm] = ids;
    let p = pair(&t, &o).unwrap();
    assert!(
        pair_of(&p, mul).is_none(),
        "the mul has no twin in its layout"
    );
    let u = p.unpaired.iter().find(|u| u.id == mul).unwrap();
    assert!(
        u.accounted && matches!(u.reason, UnpairedReason::RelaidComputation { .. }),
        "{:?}",
        u.reason
    );
    assert!(pair_of(&p, tr).is_none(), "the moved transpose is relaid");
    assert_eq!(pair_of(&p, mm).unwrap().onnx, omm);
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

#[test]
fn a_query_holding_the_attention_scale_is_covered_not_failed() {
    let (t, o, [tq, _, _, att, .., oatt]) = graphs::attention_scale_folded(0.5f32.sqrt());
    let p = pair(&t, &o).unwrap();
    assert!(
        pair_of(&p, tq).is_none(),
        "the scaled query is not compared"
    );
    let u = p.unpaired.iter().find(|u| u.id == tq).unwrap();
    assert!(
        u.accounted && matches!(u.reason, UnpairedReason::AttentionScale { .. }),
        "{:?}",
        u.reason
    );
    assert_eq!(pair_of(&p, att).unwrap().onnx, oatt);
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

#[test]
fn a_query_scaled_by_another_factor_keeps_its_pair() {
    let (t, o, [tq, ..]) = graphs::attention_scale_folded(1.0895);
    let p = pair(&t, &o).unwrap();
    assert!(
        pair_of(&p, tq).is_some(),
        "a planted scale is compared and fails"
    );
}

/// A Swin-V2 attention's relative-position MLP runs on a buffer (no model input reaches it)
/// and the exporter kept its MatMul: the MLP's Linear is compared with it, so a fault in its
/// weights is found there and not only where the bias is added to the logits.
#[test]
fn a_constant_module_the_onnx_graph_computes_is_compared() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let tb = t.op("aten::linear", "attn.mlp", &[], &[0.5, -0.5]);
    let ts = t.op("aten::sigmoid", "attn", &[tb], &[0.6, 0.4]);
    let ta = t.op("aten::add", "attn", &[ti, ts], &[1.6, 2.4]);
    t.output(0, ta);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let ob = o.op("MatMul", "attn.mlp", &[], &[0.5, -0.5]);
    let os = o.op("Sigmoid", "attn", &[ob], &[0.6, 0.4]);
    let oa = o.op("Add", "attn", &[oi, os], &[1.6, 2.4]);
    o.output(0, oa);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, tb).map(|l| l.onnx), Some(ob));
    assert_eq!(pair_of(&p, ta).map(|l| l.onnx), Some(oa));
}

/// The same module folded into an initializer by the exporter: nothing to compare it with,
/// and it stays bookkeeping (not an unpaired layer).
#[test]
fn a_constant_module_the_exporter_folded_stays_bookkeeping() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let tb = t.op("aten::linear", "attn.mlp", &[], &[0.5, -0.5]);
    let ta = t.op("aten::add", "attn", &[ti, tb], &[1.5, 1.5]);
    t.output(0, ta);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let oa = o.op("Add", "attn", &[oi], &[1.5, 1.5]);
    o.output(0, oa);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert!(pair_of(&p, tb).is_none());
    assert_eq!(
        p.coverage.torch_layers_paired,
        p.coverage.torch_layers_total
    );
}

/// A constant module ONNX computes only in part (its table kept, the arithmetic before it
/// folded): what met no twin was folded, and counts as covered, not as a missing layer.
#[test]
fn the_folded_part_of_a_constant_module_onnx_computes_is_covered() {
    // `enc`'s own ops compute from constants only (its layer is a child module), as an
    // encoder's relative-position buckets do; ONNX kept the last of them and folded the first.
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let tn = t.op("aten::neg", "enc", &[], &[-0.5, 0.5]);
    let tm = t.op("aten::mul", "enc", &[tn], &[0.5, -0.5]);
    let ta = t.op("aten::add", "enc.layer", &[ti, tm], &[1.5, 1.5]);
    t.output(0, ta);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let om = o.op("Mul", "enc", &[], &[0.5, -0.5]);
    let oa = o.op("Add", "enc.layer", &[oi, om], &[1.5, 1.5]);
    o.output(0, oa);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, tm).map(|l| l.onnx), Some(om));
    assert!(pair_of(&p, tn).is_none());
    assert_eq!(
        p.coverage.torch_layers_paired,
        p.coverage.torch_layers_total
    );
}

/// ONNX Runtime's RMSNorm fusion writes `SimplifiedLayerNormalization` in the default domain,
/// with no scope: it is the norm module's twin, as a `com.microsoft` fused node would be,
/// because the module it stands for normalises by a mean it takes (pow, mean, rsqrt, mul).
#[test]
fn a_default_domain_rms_norm_pairs_with_the_written_out_norm() {
    let x = [1.0, 2.0, 3.0, 4.0];
    let norm = [0.4, 0.7, 1.1, 1.5];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let pw = t.op("aten::pow", "layer.norm", &[ti], &[1.0, 4.0, 9.0, 16.0]);
    let mean = t.op("aten::mean", "layer.norm", &[pw], &[7.5; 4]);
    let rs = t.op("aten::rsqrt", "layer.norm", &[mean], &[0.37; 4]);
    let m1 = t.op(
        "aten::mul",
        "layer.norm",
        &[ti, rs],
        &[0.37, 0.73, 1.1, 1.46],
    );
    let m2 = t.op("aten::mul", "layer.norm", &[m1], &norm);
    let q = t.op("aten::linear", "layer.q_proj", &[m2], &[0.5; 4]);
    t.output(0, q);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let fused = o.op("SimplifiedLayerNormalization", "", &[oi], &norm);
    o.values[fused].scope_recorded = false;
    o.values[fused].node = "RMSNorm_0".into();
    let oq = o.op("MatMul", "layer.q_proj", &[fused], &[0.5; 4]);
    o.output(0, oq);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_eq!(pair_of(&p, m2).map(|l| l.onnx), Some(fused));
}

#[test]
fn towers_of_a_scopeless_graph_pair_within_the_inputs_they_are_computed_from() {
    // A two-tower model (an image and a text encoder, then their product). The simplified
    // ONNX graph has no scopes, and it runs the text tower first: one global order would pair
    // the image tower's layers with the text tower's, alike in kind and shape. What each value
    // is computed from settles it.
    let (img, txt) = ([1.0, 2.0, 3.0], [0.5, -0.5, 0.25]);
    let (v1, v2) = ([2.0, 1.0, 0.0], [0.0, 3.0, 1.0]);
    let (t1, t2) = ([-1.0, 0.5, 2.0], [1.5, 1.5, -2.0]);
    let joint = [0.0, 4.5, -2.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &img);
    let tt = t.input(1, &txt);
    let tv1 = t.op("aten::linear", "vision.fc1", &[ti], &v1);
    let tv2 = t.op("aten::linear", "vision.fc2", &[tv1], &v2);
    let tt1 = t.op("aten::linear", "text.fc1", &[tt], &t1);
    let tt2 = t.op("aten::linear", "text.fc2", &[tt1], &t2);
    let tj = t.op("aten::mul", "", &[tv2, tt2], &joint);
    t.output(0, tj);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &img);
    let ot = o.input(1, &txt);
    let ot1 = o.op("Gemm", "", &[ot], &t1);
    let ot2 = o.op("Gemm", "", &[ot1], &t2);
    let ov1 = o.op("Gemm", "", &[oi], &v1);
    let ov2 = o.op("Gemm", "", &[ov1], &v2);
    let oj = o.op("Mul", "", &[ov2, ot2], &joint);
    o.output(0, oj);
    let p = pair(&t.build(), &o.build()).unwrap();
    for (name, tv, ov) in [
        ("vision fc1", tv1, ov1),
        ("vision fc2", tv2, ov2),
        ("text fc1", tt1, ot1),
        ("text fc2", tt2, ot2),
    ] {
        assert_eq!(pair_of(&p, tv).map(|l| l.onnx), Some(ov), "{name}");
    }
}

/// A block slices the class token of stream `a` twice (for two resamplings) and that of
/// stream `c` once; a simplifier merged the two slices of `a`, both of the block's scope,
/// and sorted the slice of `c` before the product of `a`'s. The order gives the second slice
/// of `a` the slice of `c`, which it is not computed from; the merged node computes it:
/// covered, and the slice of `c` pairs with its own.
#[test]
fn a_copy_merged_with_an_earlier_one_of_its_scope_is_covered_not_crossed() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let a = t.op("aten::linear", "blk.a", &[ti], &[1.0, 2.0]);
    let c = t.op("aten::linear", "blk.c", &[ti], &[5.0, 6.0]);
    let a1 = t.op("aten::slice", "blk", &[a], &[10.0, 20.0]);
    let r1 = t.op("aten::relu", "blk", &[a1], &[10.0, 20.0]);
    let a2 = t.op("aten::slice", "blk", &[a], &[10.0, 20.0]);
    let m = t.op("aten::mul", "blk", &[a2, r1], &[100.0, 400.0]);
    let c1 = t.op("aten::slice", "blk", &[c], &[50.0, 60.0]);
    let s = t.op("aten::add", "blk", &[m, c1], &[150.0, 460.0]);
    t.output(0, s);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &[1.0, 2.0]);
    let oa = o.op("Gemm", "blk.a", &[oi], &[1.0, 2.0]);
    let oc = o.op("Gemm", "blk.c", &[oi], &[5.0, 6.0]);
    let oa1 = o.op("Slice", "blk", &[oa], &[10.0, 20.0]);
    let or1 = o.op("Relu", "blk", &[oa1], &[10.0, 20.0]);
    let oc1 = o.op("Slice", "blk", &[oc], &[50.0, 60.0]);
    let om = o.op("Mul", "blk", &[oa1, or1], &[100.0, 400.0]);
    let os = o.op("Add", "blk", &[om, oc1], &[150.0, 460.0]);
    o.output(0, os);
    let p = pair(&t.build(), &o.build()).unwrap();

    assert_eq!(pair_of(&p, a1).unwrap().onnx, oa1);
    assert!(
        pair_of(&p, a2).is_none(),
        "the merged copy has no node of its own"
    );
    let u = p.unpaired.iter().find(|u| u.id == a2).unwrap();
    assert!(
        u.accounted
            && u.reason
                == UnpairedReason::MergedCopy {
                    original: "v3".into()
                },
        "{:?}",
        u.reason
    );
    assert_eq!(pair_of(&p, c1).unwrap().onnx, oc1);
    assert_eq!(pair_of(&p, m).unwrap().onnx, om);
    assert!(p.layers.iter().all(|l| l.follows_dataflow));
    assert_eq!(p.coverage.torch_ratio(), 1.0);
}

/// A GPT-J block adds the attention's and the MLP's outputs, then the residual. ONNX
/// Runtime's transformer optimiser named the MLP's bias Add without a scope (it joins the
/// block's call, which it feeds) and fused the residual Add into a scope-less
/// SkipLayerNormalization, whose sum capture exposes. The order gives the residual Add the
/// bias Add; no value of the block repairs it, so it is undone and meets the sum.
#[test]
fn an_add_off_the_dataflow_meets_the_scopeless_sum_that_computes_it() {
    let x = [1.0, 2.0, 3.0, 4.0];
    let attn = [2.0, 1.0, 4.0, 3.0];
    let mlp = [0.5, 0.25, 0.75, 1.0];
    let both = [2.5, 1.25, 4.75, 4.0];
    let residual = [3.5, 3.25, 7.75, 8.0];
    let norm = [0.0, -1.0, 1.0, 0.0];
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let ta = t.op("aten::linear", "h.attn", &[ti], &attn);
    let tm = t.op("aten::linear", "h.mlp", &[ti], &mlp);
    let s1 = t.op("aten::add", "h", &[ta, tm], &both);
    let s2 = t.op("aten::add", "h", &[s1, ti], &residual);
    let tn = t.op("aten::layer_norm", "ln", &[s2], &norm);
    t.output(0, tn);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let oa = o.op("MatMul", "h.attn", &[oi], &attn);
    let omm = o.op("MatMul", "", &[oi], &[0.4, 0.2, 0.7, 0.9]);
    let obias = o.op("Add", "", &[omm], &mlp);
    let os1 = o.op("Add", "h", &[oa, obias], &both);
    let sum = o.op(
        "com.microsoft::SkipLayerNormalization.sum",
        "",
        &[os1, oi],
        &residual,
    );
    let on = o.op("com.microsoft::SkipLayerNormalization", "", &[sum], &norm);
    for v in [omm, obias, sum, on] {
        o.values[v].scope_recorded = false;
        o.values[v].scope.clear();
        o.values[v].node = format!("Fused_{v}");
    }
    o.output(0, on);
    let p = pair(&t.build(), &o.build()).unwrap();

    assert_eq!(pair_of(&p, s1).unwrap().onnx, os1);
    let residual_add = pair_of(&p, s2).expect("the residual add is paired");
    assert_eq!(residual_add.onnx, sum);
    assert_eq!(pair_of(&p, tn).unwrap().onnx, on);
    assert!(p.layers.iter().all(|l| l.follows_dataflow));
    assert!(p.layers.iter().all(|l| l.onnx != obias || l.torch == tm));
}

/// A module returns a tensor and the sizes beside it (`x, (H, W)`), packed into a tuple in
/// the graph: an element read back out of it is computed from that element alone. What is
/// computed from the size only is constant (bookkeeping the exporter folds), and the tensor
/// read back out stays computed from the input.
#[test]
fn an_element_unpacked_from_a_tuple_is_constant_by_its_own_producers() {
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &[1.0, 2.0]);
    let size = t.op("prim::NumToTensor", "embed", &[], &[2.0]);
    let x = t.op("aten::relu", "embed", &[ti], &[1.0, 2.0]);
    let unpacked_size = t.op("prim::TupleUnpack", "", &[x, size], &[2.0]);
    let unpacked_x = t.op("prim::TupleUnpack", "", &[x, size], &[1.0, 2.0]);
    let scaled = t.op("aten::mul", "pos", &[unpacked_size], &[4.0]);
    let mut capture = t.build();
    let before = constant_values(&capture);
    assert!(before[size] && !before[unpacked_size] && !before[scaled]);
    capture.element_inputs.insert(unpacked_size, vec![size]);
    capture.element_inputs.insert(unpacked_x, vec![x]);
    let after = constant_values(&capture);
    assert!(after[unpacked_size] && after[scaled]);
    assert!(!after[x] && !after[unpacked_x]);
}

/// An exporter that scopes the reshape building a convolution's input into the convolution
/// (a scattered canvas viewed as an image), while the convolution itself was folded with the
/// BatchNorm after it into one Conv scoped to the norm: the reshape holds nothing the
/// convolution computed and is not its output, although its shape fits.
#[test]
fn a_reshape_of_a_value_from_outside_the_module_is_not_its_output() {
    let x = [0.5, -1.0, 2.0, 3.0];
    let (canvas, conv, norm) = (
        [1.0, 2.0, 3.0, 4.0],
        [4.0, -3.0, 2.0, 1.0],
        [8.0, -6.0, 4.0, 2.0],
    );
    let mut t = Builder::new(Side::Torch);
    let ti = t.input(0, &x);
    let tv = t.op("aten::view", "", &[ti], &canvas);
    let tc = t.op("aten::_convolution", "block.0", &[tv], &conv);
    let tn = t.op("aten::batch_norm", "block.1", &[tc], &norm);
    t.output(0, tn);
    let mut o = Builder::new(Side::Onnx);
    let oi = o.input(0, &x);
    let ov = o.op("Reshape", "block.0", &[oi], &canvas);
    let on = o.op("Conv", "block.1", &[ov], &norm);
    o.output(0, on);
    let p = pair(&t.build(), &o.build()).unwrap();
    assert_ne!(pair_of(&p, tc).map(|q| q.onnx), Some(ov));
    assert_eq!(pair_of(&p, tn).map(|q| q.onnx), Some(on));
}
