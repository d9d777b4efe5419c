//! Isolated error: which values an isolation run feeds from PyTorch, and what its results
//! say about each layer.
//!
//! The accumulated error of a layer (both runtimes run the whole network from the inputs)
//! names where an error shows; the isolated error (ONNX Runtime computes the layer from
//! PyTorch's values of everything paired upstream) names where it is made. A failing layer
//! that fails in isolation too is `introduced`; one that passes in isolation is `accumulated`.
//! Only values whose pair is not in doubt are fed: feeding the wrong value would blame the
//! layer that reads it. The run itself (cutting the graph, ONNX Runtime) is `app::isolation`.

use crate::capture::tensor::DType;
use crate::capture::{Capture, ValueRole};
use crate::compare::judged::{
    Drift, DriftContributor, Isolated, LayerResult, Origin, OutputResult,
};
use crate::compare::output_tolerance::OutputTolerance;

/// One ONNX value an isolation run receives from PyTorch instead of computing it.
#[derive(Debug, Clone, PartialEq)]
pub struct FedValue {
    /// The ONNX value's name.
    pub onnx_name: String,
    /// The TorchScript value fed in its place (cast to `dtype`, reshaped to `shape`).
    pub torch_id: usize,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

/// What an isolation run feeds and fetches.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub fed: Vec<FedValue>,
    /// ONNX values to fetch (node outputs), each once, in layer order.
    pub fetch: Vec<String>,
}

/// The plan for `layers` (paired on these captures): every layer's ONNX value is fetched
/// when a node computes it; it is fed from PyTorch when the pair is not unconfirmed, the
/// element counts agree and the TorchScript value can take the ONNX value's type (the same
/// type, or a float cast to the other float precision).
pub fn plan(torch: &Capture, onnx: &Capture, layers: &[LayerResult]) -> Plan {
    let mut plan = Plan::default();
    for l in layers {
        let (t, o) = (&torch.values[l.torch_id], &onnx.values[l.onnx_id]);
        // A graph output is computed by a node like any other value: a layer whose ONNX value
        // is one (the last Linear of a head) is isolated too.
        let computed = matches!(o.role, ValueRole::Intermediate | ValueRole::Output(_));
        if !computed || plan.fetch.contains(&o.name) {
            continue;
        }
        plan.fetch.push(o.name.clone());
        let numel = |shape: &[usize]| shape.iter().product::<usize>();
        let feedable_type = t.dtype == o.dtype || (t.dtype.is_float() && o.dtype.is_float());
        if !l.unconfirmed && feedable_type && numel(&t.shape) == numel(&o.shape) {
            plan.fed.push(FedValue {
                onnx_name: o.name.clone(),
                torch_id: t.id,
                dtype: o.dtype,
                shape: o.shape.clone(),
            });
        }
    }
    plan
}

/// Records each layer's isolated error and the origin it implies. An unconfirmed pair that
/// passes in isolation is confirmed (and judged accumulated); one that fails there is
/// confirmed too (and judged introduced) unless its consumers refute it (`refuted`: they
/// hold none of its error); a refuted one gets no origin: its ONNX value may not be the
/// twin of its TorchScript one, so its failing error says nothing about where an error
/// starts.
///
/// A failing layer whose own contribution could not be isolated (no isolated error) but that
/// sits below failing layers is taken as carrying their error (`Accumulated`) while its error
/// stays within what the outputs' rule lets rounding accumulate
/// (`OutputTolerance::accumulated_bound`); beyond that it stays a failure, judged as before
/// isolation existed.
pub fn apply(
    layers: &mut [LayerResult],
    isolated: Vec<Option<Isolated>>,
    outputs: &OutputTolerance,
) {
    for (l, iso) in layers.iter_mut().zip(isolated) {
        // A doubtful pair whose ONNX value, computed from PyTorch's values, reproduces
        // PyTorch's within its tolerance is the right pair after all: what it exceeds by was
        // carried in from upstream. Its consumers agreeing is then no sign of a wrong pair.
        if l.unconfirmed && iso.as_ref().is_some_and(|i| i.pass) {
            l.unconfirmed = false;
        }
        // One that introduces error in isolation is a fault unless its consumers show the
        // pair wrong (they hold none of its error): a doubt is never how a fault that a
        // layer introduces passes.
        if l.unconfirmed && !l.refuted && iso.as_ref().is_some_and(|i| !i.pass) {
            l.unconfirmed = false;
        }
        let judged = iso.as_ref().filter(|_| !l.unconfirmed);
        l.origin = judged.map(|i| match (l.cmp.pass, i.pass) {
            (true, _) => Origin::Pass,
            (false, true) => Origin::Accumulated,
            (false, false) => Origin::Introduced,
        });
        if l.origin.is_none() && !l.cmp.pass && !l.unconfirmed && l.upstream_failed {
            let dtype = DType::from_name(&l.cmp.precision).unwrap_or(DType::F32);
            if outputs.within_accumulated_bound(&l.cmp, dtype) {
                l.origin = Some(Origin::Accumulated);
            }
        }
        l.isolated = iso;
    }
}

/// How many layers an accumulated-drift verdict names.
const DRIFT_CONTRIBUTORS: usize = 5;

/// Accumulated drift: layers or outputs fail, isolation ran, and no layer is where an error
/// starts. The layers with the largest isolated error are named, largest first.
pub fn drift(layers: &[LayerResult], outputs: &[OutputResult]) -> Option<Drift> {
    let isolated = layers.iter().any(|l| l.isolated.is_some());
    let fails = layers.iter().any(LayerResult::fails) || outputs.iter().any(|o| !o.cmp.pass);
    if !isolated || !fails || layers.iter().any(LayerResult::is_origin) {
        return None;
    }
    let mut contributors: Vec<DriftContributor> = layers
        .iter()
        .filter(|l| !l.unconfirmed)
        .filter_map(|l| {
            let iso = l.isolated.as_ref()?;
            (iso.rel_to_range > 0.0).then(|| DriftContributor {
                layer_index: l.index,
                module: l.module.clone(),
                isolated_rel_to_range: iso.rel_to_range,
            })
        })
        .collect();
    contributors.sort_by(|a, b| b.isolated_rel_to_range.total_cmp(&a.isolated_rel_to_range));
    contributors.truncate(DRIFT_CONTRIBUTORS);
    Some(Drift { contributors })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::judged::LayerStatus;

    fn layer(index: usize, pass: bool, upstream_failed: bool) -> LayerResult {
        let mut l = crate::compare::evaluate::tests::layer_result(index);
        l.cmp.pass = pass;
        l.upstream_failed = upstream_failed;
        l
    }

    fn iso(rel: f64, pass: bool) -> Option<Isolated> {
        Some(Isolated {
            max_abs: rel,
            rel_to_range: rel,
            pass,
            snr_db: None,
            rounding_floor: None,
            tied: false,
            nonfinite_mismatch: 0,
        })
    }

    #[test]
    fn a_failing_layer_without_isolated_error_below_failing_ones_is_accumulated_within_the_bound() {
        let mut layers = vec![
            layer(0, false, false),
            layer(1, false, true),
            layer(2, false, true),
        ];
        // Reference values up to 2: the outputs' absolute part allows 1e-4 * 2.
        layers[1].cmp.max_abs = 1e-4;
        layers[2].cmp.max_abs = 0.6;
        apply(
            &mut layers,
            vec![iso(1e-6, true), None, None],
            &OutputTolerance::default(),
        );
        assert_eq!(layers[1].origin, Some(Origin::Accumulated));
        assert!(!layers[1].fails());
        // Far beyond what rounding accumulates: judged as before isolation existed.
        assert_eq!(layers[2].origin, None);
        assert!(layers[2].fails());
        assert_eq!(layers[2].status(), LayerStatus::Inherited);
    }

    #[test]
    fn a_failing_layer_that_passes_in_isolation_is_accumulated_and_not_an_origin() {
        // Drift makes layer 1 fail first; layer 3 holds the real fault.
        let mut layers = vec![
            layer(0, true, false),
            layer(1, false, false),
            layer(2, false, true),
            layer(3, false, true),
        ];
        apply(
            &mut layers,
            vec![
                iso(1e-6, true),
                iso(5e-5, true),
                iso(5e-5, true),
                iso(0.2, false),
            ],
            &OutputTolerance::default(),
        );
        let origins: Vec<Option<Origin>> = layers.iter().map(|l| l.origin).collect();
        assert_eq!(
            origins,
            [
                Some(Origin::Pass),
                Some(Origin::Accumulated),
                Some(Origin::Accumulated),
                Some(Origin::Introduced)
            ]
        );
        assert_eq!(layers[1].status(), LayerStatus::Accumulated);
        assert_eq!(layers[3].status(), LayerStatus::Origin);
        let origins = crate::compare::evaluate::origins_of(&layers);
        assert_eq!(origins.len(), 1);
        assert_eq!(origins[0].layer_index, 3);
        assert!(drift(&layers, &[]).is_none());
    }

    #[test]
    fn a_refuted_pair_gets_its_isolated_error_but_no_origin() {
        let mut layers = vec![layer(0, true, false), layer(1, false, false)];
        layers[1].unconfirmed = true;
        layers[1].refuted = true;
        apply(
            &mut layers,
            vec![iso(1e-6, true), iso(0.6, false)],
            &OutputTolerance::default(),
        );
        assert_eq!(layers[0].origin, Some(Origin::Pass));
        assert_eq!(layers[1].origin, None);
        assert!(layers[1].isolated.is_some());
        assert_eq!(layers[1].status(), LayerStatus::Unconfirmed);
    }

    #[test]
    fn an_unconfirmed_pair_that_introduces_error_in_isolation_fails_unless_refuted() {
        // Its consumers carry some of its error (a softmax after mis-scaled scores), so
        // nothing shows the pair wrong: failing in isolation, it is where the error starts.
        let mut layers = vec![layer(0, true, false), layer(1, false, false)];
        layers[1].unconfirmed = true;
        layers[1].refuted = false;
        apply(
            &mut layers,
            vec![iso(1e-6, true), iso(0.25, false)],
            &OutputTolerance::default(),
        );
        assert!(!layers[1].unconfirmed);
        assert_eq!(layers[1].origin, Some(Origin::Introduced));
        assert!(layers[1].fails());
        assert_eq!(
            crate::compare::evaluate::origins_of(&layers)[0].layer_index,
            1
        );
    }

    #[test]
    fn an_unconfirmed_pair_that_passes_in_isolation_is_confirmed_as_accumulated() {
        let mut layers = vec![layer(0, false, false), layer(1, false, true)];
        layers[1].unconfirmed = true;
        apply(
            &mut layers,
            vec![iso(1e-6, true), iso(1e-6, true)],
            &OutputTolerance::default(),
        );
        assert!(!layers[1].unconfirmed);
        assert_eq!(layers[1].origin, Some(Origin::Accumulated));
        assert_eq!(layers[1].status(), LayerStatus::Accumulated);
        assert!(!layers[1].fails());
    }

    #[test]
    fn failing_outputs_with_no_layer_failing_in_isolation_are_drift_named_by_contribution() {
        let mut layers = vec![
            layer(0, true, false),
            layer(1, false, false),
            layer(2, false, true),
        ];
        apply(
            &mut layers,
            vec![iso(1e-6, true), iso(4e-5, true), iso(6e-5, true)],
            &OutputTolerance::default(),
        );
        assert!(crate::compare::evaluate::origins_of(&layers).is_empty());
        // Layers that only carry error from upstream are not failures: without a failing
        // output this is a pass, with the accumulated error as information.
        assert!(layers.iter().all(|l| !l.fails()));
        assert!(drift(&layers, &[]).is_none());
        let output = OutputResult {
            name: "out".into(),
            position: 0,
            cmp: {
                let mut c = layers[2].cmp.clone();
                c.pass = false;
                c
            },
            rounding: None,
        };
        let d = drift(&layers, &[output]).expect("drift");
        let named: Vec<usize> = d.contributors.iter().map(|c| c.layer_index).collect();
        assert_eq!(named, [2, 1, 0]);
    }

    #[test]
    fn without_isolation_origins_are_judged_as_before() {
        let layers = vec![layer(0, false, false), layer(1, false, true)];
        assert_eq!(layers[0].status(), LayerStatus::Origin);
        assert_eq!(layers[1].status(), LayerStatus::Inherited);
        assert!(drift(&layers, &[]).is_none());
    }
}
