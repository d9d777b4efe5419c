//! Element-level detail for the few layers a reader will look at closely: the divergence
//! origins and the worst layers. Reports draw a scatter of reference against ONNX values and,
//! for channel-shaped tensors, the largest error per channel (one broken channel stands out).
//!
//! Only these layers get detail, so the report stays small however large the network is.

use crate::capture::tensor::HostTensor;
use serde::Serialize;

/// Points kept for a scatter plot; the worst element is always among them.
const SCATTER_POINTS: usize = 2000;
/// Channel bars beyond this many would not be readable; larger tensors keep the first ones.
const MAX_CHANNELS: usize = 4096;

#[derive(Debug, Clone, Serialize)]
pub struct LayerDetail {
    pub layer_index: usize,
    /// `first divergence`, `divergence origin`, or `worst layer`.
    pub why: String,
    /// Sampled `[reference, onnx]` value pairs, evenly spaced through the tensor.
    pub scatter: Vec<[f32; 2]>,
    /// Largest |onnx - reference| per channel (dimension 1) for tensors of rank 3 or more.
    pub channel_max_abs: Vec<f64>,
}

pub fn layer_detail(
    index: usize,
    why: &str,
    reference: &HostTensor,
    test: &HostTensor,
) -> LayerDetail {
    let n = reference.numel().min(test.numel());
    let stride = n.div_ceil(SCATTER_POINTS).max(1);
    let mut worst = (0usize, -1.0f64);
    let mut scatter = Vec::with_capacity(SCATTER_POINTS + 1);
    for i in 0..n {
        let (r, t) = (reference.data.get_f64(i), test.data.get_f64(i));
        let d = (t - r).abs();
        if d > worst.1 {
            worst = (i, d);
        }
        if i % stride == 0 {
            scatter.push([r as f32, t as f32]);
        }
    }
    if n > 0 && !worst.0.is_multiple_of(stride) {
        let i = worst.0;
        scatter.push([
            reference.data.get_f64(i) as f32,
            test.data.get_f64(i) as f32,
        ]);
    }
    LayerDetail {
        layer_index: index,
        why: why.to_string(),
        scatter,
        channel_max_abs: channel_max_abs(reference, test),
    }
}

fn channel_max_abs(reference: &HostTensor, test: &HostTensor) -> Vec<f64> {
    let shape = &reference.shape;
    if shape.len() < 3 || reference.numel() != test.numel() {
        return Vec::new();
    }
    let channels = shape[1];
    let inner: usize = shape[2..].iter().product();
    let mut max = vec![0.0f64; channels.min(MAX_CHANNELS)];
    for (i, slot) in (0..reference.numel()).map(|i| (i, (i / inner) % channels)) {
        if slot < max.len() {
            let d = (test.data.get_f64(i) - reference.data.get_f64(i)).abs();
            if d > max[slot] || d.is_nan() {
                max[slot] = d;
            }
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_broken_channel_stands_out() {
        // shape 1x3x2: channel 1 is off by 0.5 in one element.
        let r = HostTensor::f32(vec![1, 3, 2], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let t = HostTensor::f32(vec![1, 3, 2], vec![0.0, 1.0, 2.5, 3.0, 4.0, 5.0]);
        let d = layer_detail(0, "worst layer", &r, &t);
        assert_eq!(d.channel_max_abs, vec![0.0, 0.5, 0.0]);
        assert!(d.scatter.contains(&[2.0, 2.5]));
    }

    #[test]
    fn scatter_is_bounded_and_keeps_the_worst_element() {
        let n = 100_003;
        let r = HostTensor::f32(vec![n], (0..n).map(|i| i as f32).collect());
        let mut tv: Vec<f32> = (0..n).map(|i| i as f32).collect();
        tv[77_777] += 9.0;
        let t = HostTensor::f32(vec![n], tv);
        let d = layer_detail(0, "worst layer", &r, &t);
        assert!(d.scatter.len() <= SCATTER_POINTS + 1);
        assert!(d.scatter.contains(&[77_777.0, 77_786.0]));
        assert!(d.channel_max_abs.is_empty());
    }
}
