//! One pass over two float32 activations of the same length, in blocks the compiler turns
//! into vector instructions: the extremes and sums the pairing's value checks need.
//!
//! Nearly every captured value is float32. Scanning it as f64, element by element, costs
//! a conversion and a dependent step per element; eight independent float32 lanes do
//! the same work several elements per instruction. Maxima are exact (the largest of the
//! same float32 numbers); a difference is rounded once to float32 (relative 6e-8, where f64
//! kept it exact); sums of products add float32 products per lane before they join f64
//! sums, which moves them by rounding only.
//!
//! The same code runs as AVX2 where the processor has it (chosen at run time, so the
//! binary still runs on any x86-64): one 256-bit register per accumulator, about twice
//! the speed of the SSE2 baseline. Both follow the same order of operations, so they
//! return the same bits. A distance needs no sums, and a scan without them does half the
//! work per element (`apart`).

/// Elements side by side: independent accumulators the compiler can keep in vectors (one
/// AVX2 register each; sixteen took more SSE2 registers than there are, and ran slower).
const WIDTH: usize = 8;

/// Elements summed in float32 before the sums move to f64 (thirty-two per lane).
const BLOCK: usize = WIDTH * 32;

/// What one scan of `x` (the value under test) against `y` (the reference) found.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct Extremes {
    /// The largest |x|, |y| and |x - y| (NaN elements left out).
    pub max_x: f32,
    pub max_y: f32,
    pub max_apart: f32,
    /// Some difference is NaN or infinite.
    pub not_finite: bool,
    /// Sums of x·y and y² (NaN when an element is).
    pub xy: f64,
    pub yy: f64,
}

/// One block's accumulators, lane by lane.
struct Lanes {
    xy: [f32; WIDTH],
    yy: [f32; WIDTH],
    max_x: [f32; WIDTH],
    max_y: [f32; WIDTH],
    apart: [f32; WIDTH],
    /// Differences times zero: NaN once a difference is NaN or infinite.
    poison: [f32; WIDTH],
}

impl Lanes {
    fn new() -> Lanes {
        Lanes {
            xy: [0.0; WIDTH],
            yy: [0.0; WIDTH],
            max_x: [0.0; WIDTH],
            max_y: [0.0; WIDTH],
            apart: [0.0; WIDTH],
            poison: [0.0; WIDTH],
        }
    }

    /// Adds one element pair to a lane; `SUMS` says whether the sums are wanted.
    #[inline(always)]
    fn add<const SUMS: bool>(&mut self, lane: usize, x: f32, y: f32) {
        let d = (x - y).abs();
        if SUMS {
            self.xy[lane] += x * y;
            self.yy[lane] += y * y;
        }
        // `>` rather than `max`: a plain comparison vectorises, and NaN loses either way.
        self.max_x[lane] = if x.abs() > self.max_x[lane] {
            x.abs()
        } else {
            self.max_x[lane]
        };
        self.max_y[lane] = if y.abs() > self.max_y[lane] {
            y.abs()
        } else {
            self.max_y[lane]
        };
        self.apart[lane] = if d > self.apart[lane] {
            d
        } else {
            self.apart[lane]
        };
        self.poison[lane] += d * 0.0;
    }

    fn fold_into(&self, e: &mut Extremes) {
        let max = |v: &[f32; WIDTH], m: f32| v.iter().fold(m, |m, &x| if x > m { x } else { m });
        e.max_x = max(&self.max_x, e.max_x);
        e.max_y = max(&self.max_y, e.max_y);
        e.max_apart = max(&self.apart, e.max_apart);
        e.not_finite |= self.poison.iter().any(|p| p.is_nan());
        e.xy += self.xy.iter().map(|&v| f64::from(v)).sum::<f64>();
        e.yy += self.yy.iter().map(|&v| f64::from(v)).sum::<f64>();
    }
}

/// Scans `x` against `y` (equally long; a longer one is cut to the other's length).
pub(super) fn scan(x: &[f32], y: &[f32]) -> Extremes {
    dispatch::<true>(x, y)
}

/// `scan` without the sums (`xy` and `yy` stay 0): what a distance needs.
pub(super) fn apart(x: &[f32], y: &[f32]) -> Extremes {
    dispatch::<false>(x, y)
}

fn dispatch<const SUMS: bool>(x: &[f32], y: &[f32]) -> Extremes {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2, checked just above.
        return unsafe { scan_avx2::<SUMS>(x, y) };
    }
    scan_blocks::<SUMS>(x, y)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn scan_avx2<const SUMS: bool>(x: &[f32], y: &[f32]) -> Extremes {
    scan_blocks::<SUMS>(x, y)
}

/// The scan itself, inlined into each caller so that it is compiled for its instructions.
#[inline(always)]
fn scan_blocks<const SUMS: bool>(x: &[f32], y: &[f32]) -> Extremes {
    let mut found = Extremes::default();
    for (xs, ys) in x.chunks(BLOCK).zip(y.chunks(BLOCK)) {
        let mut lanes = Lanes::new();
        let (xc, yc) = (xs.chunks_exact(WIDTH), ys.chunks_exact(WIDTH));
        let rest = xc.remainder().iter().zip(yc.remainder());
        for (a, b) in xc.zip(yc) {
            for lane in 0..WIDTH {
                lanes.add::<SUMS>(lane, a[lane], b[lane]);
            }
        }
        for (lane, (&a, &b)) in rest.enumerate() {
            lanes.add::<SUMS>(lane, a, b);
        }
        lanes.fold_into(&mut found);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extremes_and_sums_match_a_plain_f64_scan() {
        // Not a multiple of the block or the width: the remainders are scanned too.
        let x: Vec<f32> = (0..1000).map(|i| ((i as f32) * 0.37).sin() * 3.0).collect();
        let y: Vec<f32> = x
            .iter()
            .enumerate()
            .map(|(i, v)| v + (i % 7) as f32 * 1e-3)
            .collect();
        let e = scan(&x, &y);
        let f = |v: f32| f64::from(v);
        let xy: f64 = x.iter().zip(&y).map(|(&a, &b)| f(a) * f(b)).sum();
        let yy: f64 = y.iter().map(|&b| f(b) * f(b)).sum();
        assert!((e.xy - xy).abs() <= 1e-5 * xy.abs());
        assert!((e.yy - yy).abs() <= 1e-5 * yy);
        let max = |v: &[f32]| v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        assert_eq!(e.max_x, max(&x));
        assert_eq!(e.max_y, max(&y));
        let apart = x
            .iter()
            .zip(&y)
            .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
        assert_eq!(e.max_apart, apart);
        assert!(!e.not_finite);
    }

    #[test]
    fn every_instruction_set_and_the_scan_without_sums_agree_to_the_bit() {
        let x: Vec<f32> = (0..5000).map(|i| ((i as f32) * 0.91).cos() * 7.0).collect();
        let y: Vec<f32> = x.iter().map(|v| v * 1.0001 - 1e-4).collect();
        let portable = scan_blocks::<true>(&x, &y);
        // The processor's own choice (AVX2 on nearly every x86-64 machine) gives the same bits.
        assert_eq!(scan(&x, &y), portable);
        let without_sums = apart(&x, &y);
        assert_eq!((without_sums.xy, without_sums.yy), (0.0, 0.0));
        assert_eq!(
            Extremes {
                xy: portable.xy,
                yy: portable.yy,
                ..without_sums
            },
            portable
        );
    }

    #[test]
    fn nan_and_infinity_are_reported_and_left_out_of_maxima() {
        let mut x = vec![1.0f32; 40];
        let y = vec![1.0f32; 40];
        x[33] = f32::NAN;
        let e = scan(&x, &y);
        assert!(e.not_finite && e.xy.is_nan());
        assert_eq!((e.max_x, e.max_apart), (1.0, 0.0));
        x[33] = f32::INFINITY;
        assert!(scan(&x, &y).not_finite);
        assert!(!scan(&y, &y).not_finite);
        assert_eq!(scan(&[], &[]), Extremes::default());
    }
}
