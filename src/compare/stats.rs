//! Error statistics of one (reference, test) tensor pair: how far the test runtime's values
//! are from the reference's, where the worst element is, how many elements break the
//! tolerance, and how non-finite values line up. Everything is computed in f64 from the exact
//! values each runtime produced (fp16 stays fp16 until widened here), in one pass over the
//! data, in parallel over fixed chunks for large tensors so that the result does not depend on
//! the number of threads. Within a chunk, blocks of finite elements compute everything whose
//! result does not depend on order (maxima, counts) lane by lane, where the compiler
//! vectorises it, find each error's histogram bin from its exponent bits, and add the sums one
//! element after the other as a plain loop would: the numbers are the same bit for bit. A mismatch is a value (`ErrorStats::mismatches`), never an error;
//! the only error is a pair that cannot be compared at all (`ShapeMismatch`).

use half::{bf16, f16};
use rayon::prelude::*;
use serde::{Serialize, Serializer};

use crate::capture::tensor::{format_shape, with_data, HostTensor, TensorData};
use crate::compare::bound::{ElementBound, Tolerance};

/// Writes a non-finite number (an SNR of +inf for identical tensors) as `null`: JSON has no
/// infinity.
pub fn finite_or_null<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.is_finite() {
        s.serialize_f64(*v)
    } else {
        s.serialize_none()
    }
}

/// Elements per chunk. Tensors up to this size are done on the calling thread; larger ones are
/// split at these fixed boundaries and the chunks run in parallel. The boundaries never depend
/// on the thread count, and partial results are merged in chunk order, so the f64 sums (and
/// everything else) are bit-identical however many threads rayon has.
const CHUNK: usize = 64 * 1024;

/// Lower edges of the decade bins of the error histogram: `[1e-12, 1e-11)` ... `[1e1, 1e2)`,
/// and `[1e2, inf)` above the last one.
const DECADE_EDGES: [f64; 15] = [
    1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2,
];

/// Bin 0 (exactly zero), bin 1 (below 1e-12), then one bin per lower edge in `DECADE_EDGES`.
const N_BINS: usize = 2 + DECADE_EDGES.len();

/// Log-binned histogram of `|t - r|` over the element pairs where both sides are finite.
///
/// Bins (see `Histogram::edges` and `Histogram::labels`): bin 0 counts errors that are exactly
/// 0; bin 1 counts `0 < e < 1e-12`; bins 2..=15 the decades `[1e-12, 1e-11)` ... `[1e1, 1e2)`;
/// bin 16 counts `e >= 1e2` (including an error that overflowed to infinity).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(transparent)]
pub struct Histogram {
    pub bins: Vec<u64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            bins: vec![0; N_BINS],
        }
    }
}

impl Histogram {
    /// The `bins.len() + 1` bin boundaries `[0, 0, 1e-12, 1e-11, ..., 1e1, 1e2, inf]`.
    ///
    /// Bin `i` holds the errors `e` with `edges[i] <= e < edges[i + 1]`, except the first two:
    /// bin 0 is the single value `e == 0` (hence the repeated 0) and bin 1 is `0 < e < 1e-12`.
    pub fn edges() -> Vec<f64> {
        let mut edges = vec![0.0, 0.0];
        edges.extend_from_slice(&DECADE_EDGES);
        edges.push(f64::INFINITY);
        edges
    }

    /// One human-readable label per bin, for tables and charts: `0`, `(0, 1e-12)`,
    /// `[1e-12, 1e-11)`, ..., `[1e2, inf)`.
    pub fn labels() -> Vec<String> {
        let edges = Self::edges();
        (0..N_BINS)
            .map(|i| match i {
                0 => "0".to_string(),
                1 => format!("(0, {:e})", edges[2]),
                _ if edges[i + 1].is_infinite() => format!("[{:e}, inf)", edges[i]),
                _ => format!("[{:e}, {:e})", edges[i], edges[i + 1]),
            })
            .collect()
    }

    /// Number of errors counted (the finite element pairs).
    pub fn total(&self) -> u64 {
        self.bins.iter().sum()
    }
}

/// Which histogram bin an error `e >= 0` falls in.
#[inline]
fn bin_of(e: f64) -> usize {
    // A branch-free binary search over the 15 decade edges (padded to 16 with +inf): four
    // compare-and-adds, where a branching search mispredicts on noisy errors and a linear
    // count costs fifteen. Exact at the edges, unlike log10. `above` ends as the number of
    // edges <= e; zero is below every edge, so it lands in bin 0 and every other error one
    // bin further up.
    const PADDED: [f64; 16] = {
        let mut p = [f64::INFINITY; 16];
        let mut i = 0;
        while i < DECADE_EDGES.len() {
            p[i] = DECADE_EDGES[i];
            i += 1;
        }
        p
    };
    let mut above = 0;
    for step in [8, 4, 2, 1] {
        above += step * (PADDED[above + step - 1] <= e) as usize;
    }
    (e != 0.0) as usize + above
}

/// For every exponent field of an f64: the bin of the smallest value with that exponent,
/// and the decade edge between it and twice it, where there is one (a factor of 2 holds at
/// most one power of 10; +inf where none, NaN for infinities, which never reach it). Built
/// from `bin_of` itself, so that `bin_by_exponent` gives its answer with one table read.
static BINADE_BINS: [(u8, f64); 2048] = {
    let mut table = [(0u8, f64::INFINITY); 2048];
    // Exponent 0: zero (bin 0, see `bin_by_exponent`) and subnormals, all below 1e-12.
    table[0] = (1, f64::INFINITY);
    let mut exponent = 1;
    while exponent < 2047 {
        let start = f64::from_bits((exponent as u64) << 52);
        let mut low = 1u8;
        let mut edge = f64::INFINITY;
        let mut k = 0;
        while k < DECADE_EDGES.len() {
            if DECADE_EDGES[k] <= start {
                low += 1;
            } else if DECADE_EDGES[k] < start * 2.0 {
                edge = DECADE_EDGES[k];
            }
            k += 1;
        }
        table[exponent] = (low, edge);
        exponent += 1;
    }
    table[2047] = (N_BINS as u8 - 1, f64::NAN);
    table
};

/// `bin_of` for an error `e >= 0` (not NaN), from its exponent bits: the same bin, without
/// a search.
#[inline(always)]
fn bin_by_exponent(e: f64) -> usize {
    let (low, edge) = BINADE_BINS[(e.to_bits() >> 52) as usize & 0x7ff];
    low as usize + (e >= edge) as usize - (e == 0.0) as usize
}

/// Error statistics of one tensor pair (reference = TorchScript, test = ONNX Runtime).
///
/// The numeric statistics (`max_abs` ... `snr_db`, histogram) are over the element pairs where
/// both sides are finite; NaN and infinities are counted separately per side and only enter
/// `mismatches` through `nonfinite_mismatch`.
///
/// The one definition of every statistic a report shows: serialised in place into each
/// layer and output of the JSON report (`outcome::Comparison`), under the report's names
/// (`nan_torch` for `nan_ref`); the fields marked `skip` are for the program only.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ErrorStats {
    #[serde(skip)]
    pub numel: usize,
    /// Largest `|t - r|`.
    #[serde(serialize_with = "finite_or_null")]
    pub max_abs: f64,
    /// Row-major multi-index of the first element with the largest error; empty when there is
    /// no finite pair (numel 0, or every pair has a NaN/Inf).
    pub max_abs_index: Vec<usize>,
    /// Mean of `|t - r|` over the finite pairs.
    #[serde(serialize_with = "finite_or_null")]
    pub mean_abs: f64,
    /// Root mean square of `t - r` over the finite pairs.
    #[serde(serialize_with = "finite_or_null")]
    pub rmse: f64,
    /// Largest `|t - r| / |r|` over finite pairs with `|r| > f64::MIN_POSITIVE`; 0 if none.
    #[serde(serialize_with = "finite_or_null")]
    pub max_rel: f64,
    /// `max_abs / ref_max_abs`: the error relative to the reference's range. 0 when both are
    /// 0; infinite when the reference is all zeros and the test is not.
    #[serde(serialize_with = "finite_or_null")]
    pub rel_to_range: f64,
    /// Largest finite `|r|`.
    #[serde(skip)]
    pub ref_max_abs: f64,
    /// Cosine similarity of the two tensors as vectors: 1.0 when both are all zeros, 0 when
    /// exactly one is; NaN only if the sums of squares overflow f64 (values beyond ~1e154).
    /// Blind to scale errors, so never a gate on its own.
    #[serde(serialize_with = "finite_or_null")]
    pub cosine: f64,
    /// `10 * log10(sum r^2 / sum (t - r)^2)`; +inf when identical (written as `null`).
    #[serde(serialize_with = "finite_or_null")]
    pub snr_db: f64,
    /// Elements outside the tolerance (see `compare`), including non-finite mismatches.
    #[serde(skip)]
    pub mismatches: usize,
    /// `mismatches / numel` (0 when numel is 0).
    pub mismatch_ratio: f64,
    #[serde(rename = "nan_torch")]
    pub nan_ref: usize,
    #[serde(rename = "nan_onnx")]
    pub nan_test: usize,
    /// Infinities of either sign.
    #[serde(rename = "inf_torch")]
    pub inf_ref: usize,
    #[serde(rename = "inf_onnx")]
    pub inf_test: usize,
    /// Positions where the finiteness pattern differs: NaN vs a number, +inf vs -inf, a number
    /// vs an infinity, NaN vs an infinity.
    #[serde(skip)]
    pub nonfinite_mismatch: usize,
    /// The tolerance the elements were held to (`atol`, `rtol`).
    #[serde(flatten)]
    pub tol: Tolerance,
    /// The smallest `atol` under which every finite element would pass with `rtol` 0:
    /// `max_abs / max(1, max|ref|)` (the bound's absolute part is scaled the same way). With
    /// `required_rtol`, what a team sets its gate from on a clean run (Polygraphy's "minimum
    /// required tolerance").
    #[serde(serialize_with = "finite_or_null")]
    pub required_atol: f64,
    /// The smallest `rtol` under which every finite element would pass at this pair's own
    /// `atol`: 0 when the absolute part alone covers every element; infinite (`null`) when an
    /// element whose reference is 0 exceeds the absolute part.
    #[serde(serialize_with = "finite_or_null")]
    pub required_rtol: f64,
    /// Every element within tolerance: `mismatches == 0`.
    pub pass: bool,
    pub histogram: Histogram,
}

/// The pair cannot be compared element by element: shapes (or element counts) differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeMismatch {
    pub reference_shape: Vec<usize>,
    pub reference_numel: usize,
    pub test_shape: Vec<usize>,
    pub test_numel: usize,
}

impl std::fmt::Display for ShapeMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "shape mismatch: reference is {} ({} elements), test is {} ({} elements)",
            format_shape(&self.reference_shape),
            self.reference_numel,
            format_shape(&self.test_shape),
            self.test_numel
        )
    }
}

impl std::error::Error for ShapeMismatch {}

/// Element types as the statistics see them: widened to f64. Lets the inner loop be generic
/// over slices, so the dtype is matched once per tensor pair and never per element.
trait Widen: Copy + Send + Sync {
    fn widen(self) -> f64;
}

macro_rules! widen_as {
    ($($t:ty),*) => {
        $(impl Widen for $t {
            #[inline(always)]
            fn widen(self) -> f64 {
                self as f64
            }
        })*
    };
}
widen_as!(f32, f64, i8, i16, i32, i64, u8);

impl Widen for f16 {
    #[inline(always)]
    fn widen(self) -> f64 {
        self.to_f64()
    }
}

impl Widen for bf16 {
    #[inline(always)]
    fn widen(self) -> f64 {
        self.to_f64()
    }
}

impl Widen for bool {
    #[inline(always)]
    fn widen(self) -> f64 {
        self as u8 as f64
    }
}

/// Partial statistics of one chunk; chunks merge in order into the whole tensor's.
#[derive(Debug, Clone)]
struct Accumulator {
    /// Pairs where both sides are finite: the population of every numeric statistic.
    finite_pairs: usize,
    /// -1 until the first finite pair, so the first one always wins.
    max_abs: f64,
    /// Flat index of `max_abs` (first occurrence); meaningless while `max_abs < 0`.
    max_abs_at: usize,
    sum_abs: f64,
    sum_err_sq: f64,
    sum_ref_sq: f64,
    sum_test_sq: f64,
    sum_dot: f64,
    max_rel: f64,
    /// Largest `(|t - r| - atol_scaled) / |r|` over elements beyond the absolute part.
    required_rtol: f64,
    mismatches: usize,
    nan_ref: usize,
    nan_test: usize,
    inf_ref: usize,
    inf_test: usize,
    nonfinite_mismatch: usize,
    /// The histogram of the elements scanned one at a time.
    bins: [u64; N_BINS],
    /// The histogram of the elements scanned in blocks, in four copies taken in turn, so
    /// that errors falling in the same bin one after the other do not wait for each other's
    /// increment; `histogram` adds them up.
    block_bins: [[u64; N_BINS]; 4],
}

/// Elements per block of the vectorised scan.
const BLOCK: usize = 16;

impl Accumulator {
    fn new() -> Self {
        Accumulator {
            finite_pairs: 0,
            max_abs: -1.0,
            max_abs_at: 0,
            sum_abs: 0.0,
            sum_err_sq: 0.0,
            sum_ref_sq: 0.0,
            sum_test_sq: 0.0,
            sum_dot: 0.0,
            max_rel: 0.0,
            required_rtol: 0.0,
            mismatches: 0,
            nan_ref: 0,
            nan_test: 0,
            inf_ref: 0,
            inf_test: 0,
            nonfinite_mismatch: 0,
            bins: [0; N_BINS],
            block_bins: [[0; N_BINS]; 4],
        }
    }

    /// Every element's bin, whichever way it was scanned.
    fn histogram(&self) -> [u64; N_BINS] {
        let mut bins = self.bins;
        for copy in &self.block_bins {
            for (bin, count) in bins.iter_mut().zip(copy) {
                *bin += count;
            }
        }
        bins
    }

    /// Folds in the chunk that comes right after `self`'s. On a tie for `max_abs` the earlier
    /// element is kept, so the reported index is the first worst element.
    fn merge(mut self, later: &Accumulator) -> Self {
        self.finite_pairs += later.finite_pairs;
        if later.max_abs > self.max_abs {
            self.max_abs = later.max_abs;
            self.max_abs_at = later.max_abs_at;
        }
        self.sum_abs += later.sum_abs;
        self.sum_err_sq += later.sum_err_sq;
        self.sum_ref_sq += later.sum_ref_sq;
        self.sum_test_sq += later.sum_test_sq;
        self.sum_dot += later.sum_dot;
        self.max_rel = self.max_rel.max(later.max_rel);
        self.required_rtol = self.required_rtol.max(later.required_rtol);
        self.mismatches += later.mismatches;
        self.nan_ref += later.nan_ref;
        self.nan_test += later.nan_test;
        self.inf_ref += later.inf_ref;
        self.inf_test += later.inf_test;
        self.nonfinite_mismatch += later.nonfinite_mismatch;
        for (a, b) in self.bins.iter_mut().zip(later.bins.iter()) {
            *a += b;
        }
        for (mine, theirs) in self.block_bins.iter_mut().zip(&later.block_bins) {
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a += b;
            }
        }
        self
    }

    /// One pass over a chunk. `offset` is the flat index of the chunk's first element.
    /// Whole blocks of finite pairs go through `block`, everything else (a block with a NaN
    /// or an infinity, the tail) through `one`, in element order.
    fn scan<R: Widen, T: Widen>(
        reference: &[R],
        test: &[T],
        offset: usize,
        bound: ElementBound,
    ) -> Self {
        let mut acc = Accumulator::new();
        let mut references = reference.chunks_exact(BLOCK);
        let mut tests = test.chunks_exact(BLOCK);
        let mut at = offset;
        for (rc, tc) in (&mut references).zip(&mut tests) {
            let mut r = [0.0; BLOCK];
            let mut t = [0.0; BLOCK];
            for ((r, t), (&rv, &tv)) in r.iter_mut().zip(t.iter_mut()).zip(rc.iter().zip(tc)) {
                *r = rv.widen();
                *t = tv.widen();
            }
            let finite = r
                .iter()
                .zip(&t)
                .fold(true, |all, (r, t)| all & r.is_finite() & t.is_finite());
            if finite {
                acc.block(&r, &t, at, bound);
            } else {
                for (i, (&r, &t)) in r.iter().zip(&t).enumerate() {
                    acc.one(r, t, at + i, bound);
                }
            }
            at += BLOCK;
        }
        let tail = references.remainder().iter().zip(tests.remainder());
        for (i, (&r, &t)) in tail.enumerate() {
            acc.one(r.widen(), t.widen(), at + i, bound);
        }
        acc
    }

    /// One block of finite pairs; `at` is the flat index of its first element. The same
    /// result as `one` on each element in turn.
    #[inline(always)]
    fn block(&mut self, r: &[f64; BLOCK], t: &[f64; BLOCK], at: usize, bound: ElementBound) {
        let err: [f64; BLOCK] = std::array::from_fn(|i| t[i] - r[i]);
        let e = err.map(f64::abs);
        let r_abs = r.map(f64::abs);
        // The sums in element order, each product rounded as `one` rounds it.
        for (((&e, &err), &r), &t) in e.iter().zip(&err).zip(r).zip(t) {
            self.sum_abs += e;
            self.sum_err_sq += err * err;
            self.sum_ref_sq += r * r;
            self.sum_test_sq += t * t;
            self.sum_dot += r * t;
        }
        self.finite_pairs += BLOCK;
        // Largest error, first occurrence: the block's maximum (exact in any order), then
        // where it first is.
        let top = lane_max(&e);
        if top > self.max_abs {
            self.max_abs = top;
            self.max_abs_at = at + e.iter().position(|&x| x == top).unwrap_or(0);
        }
        // Counts are exact in any order.
        let mut within = 0;
        let mut beyond_atol = false;
        for (&e, &r_abs) in e.iter().zip(&r_abs) {
            within += (e <= bound.at(r_abs)) as usize;
            beyond_atol |= e > bound.atol_scaled;
        }
        self.mismatches += BLOCK - within;
        for (k, &e) in e.iter().enumerate() {
            self.block_bins[k % 4][bin_by_exponent(e)] += 1;
        }
        // `e / |r|` is worth dividing only where it may beat the running maximum: `e` at least
        // `max_rel * |r|`, lowered by far more than that product's rounding (2^-50 against
        // 2^-53), so that no element whose quotient is larger is skipped. Once the maximum
        // has settled, blocks need no division at all.
        let floor = self.max_rel;
        let mut may_beat = false;
        for (&e, &r_abs) in e.iter().zip(&r_abs) {
            let candidate = e >= floor * r_abs * (1.0 - 4.0 * f64::EPSILON);
            may_beat |= candidate & (r_abs > f64::MIN_POSITIVE);
        }
        if may_beat {
            for (&e, &r_abs) in e.iter().zip(&r_abs) {
                if r_abs > f64::MIN_POSITIVE {
                    let rel = e / r_abs;
                    if rel > self.max_rel {
                        self.max_rel = rel;
                    }
                }
            }
        }
        // Rare on a passing pair, as in `one`.
        if beyond_atol {
            for (&e, &r_abs) in e.iter().zip(&r_abs) {
                self.required_rtol_of(e, r_abs, bound);
            }
        }
    }

    /// What relative tolerance an element beyond the absolute part would need.
    #[inline(always)]
    fn required_rtol_of(&mut self, e: f64, r_abs: f64, bound: ElementBound) {
        if e > bound.atol_scaled {
            let need = if r_abs > f64::MIN_POSITIVE {
                (e - bound.atol_scaled) / r_abs
            } else {
                f64::INFINITY
            };
            if need > self.required_rtol {
                self.required_rtol = need;
            }
        }
    }

    /// One element pair, at flat index `at`.
    #[inline(always)]
    fn one(&mut self, r: f64, t: f64, at: usize, bound: ElementBound) {
        let acc = self;
        if r.is_finite() && t.is_finite() {
            let err = t - r;
            let e = err.abs();
            acc.finite_pairs += 1;
            acc.sum_abs += e;
            acc.sum_err_sq += err * err;
            acc.sum_ref_sq += r * r;
            acc.sum_test_sq += t * t;
            acc.sum_dot += r * t;
            if e > acc.max_abs {
                acc.max_abs = e;
                acc.max_abs_at = at;
            }
            let r_abs = r.abs();
            if r_abs > f64::MIN_POSITIVE {
                let rel = e / r_abs;
                if rel > acc.max_rel {
                    acc.max_rel = rel;
                }
            }
            if !approx::AbsDiffEq::abs_diff_eq(&t, &r, bound.at(r_abs)) {
                acc.mismatches += 1;
            }
            acc.required_rtol_of(e, r_abs, bound);
            acc.bins[bin_of(e)] += 1;
        } else {
            acc.nan_ref += r.is_nan() as usize;
            acc.nan_test += t.is_nan() as usize;
            acc.inf_ref += r.is_infinite() as usize;
            acc.inf_test += t.is_infinite() as usize;
            // Both NaN, or the same infinity, is agreement; anything else here differs in
            // finiteness (a finite value never equals an infinity).
            let agree = (r.is_nan() && t.is_nan()) || r == t;
            if !agree {
                acc.mismatches += 1;
                acc.nonfinite_mismatch += 1;
            }
        }
    }
}

/// The largest of a block's values (all non-negative, none NaN), by halving: elementwise
/// steps the compiler vectorises, exact in any order.
#[inline(always)]
fn lane_max(v: &[f64; BLOCK]) -> f64 {
    let mut m = *v;
    let mut width = BLOCK / 2;
    while width > 0 {
        let (low, high) = m.split_at_mut(width);
        for (a, &b) in low.iter_mut().zip(&high[..width]) {
            *a = if b > *a { b } else { *a };
        }
        width /= 2;
    }
    m[0]
}

/// Largest finite `|r|`, a first read of the reference alone (the element bound needs it).
fn finite_max_abs<R: Widen>(reference: &[R]) -> f64 {
    // Lane by lane, so that the compiler vectorises it; a max is exact in any order.
    let scan = |chunk: &[R]| {
        let mut lanes = [0.0_f64; BLOCK];
        let mut blocks = chunk.chunks_exact(BLOCK);
        for block in &mut blocks {
            for (m, &r) in lanes.iter_mut().zip(block) {
                let a = r.widen().abs();
                *m = if a > *m && a.is_finite() { a } else { *m };
            }
        }
        let tail = blocks
            .remainder()
            .iter()
            .map(|&r| r.widen().abs())
            .filter(|a| a.is_finite())
            .fold(0.0_f64, f64::max);
        lane_max(&lanes).max(tail)
    };
    if reference.len() <= CHUNK {
        scan(reference)
    } else {
        // A max is exact in any order, so a plain parallel reduce is deterministic.
        reference
            .par_chunks(CHUNK)
            .map(scan)
            .reduce(|| 0.0, f64::max)
    }
}

/// Statistics of two equally long slices; the typed core of `compare`.
fn compare_slices<R: Widen, T: Widen>(
    reference: &[R],
    test: &[T],
    tol: Tolerance,
) -> (f64, Accumulator) {
    let ref_max_abs = finite_max_abs(reference);
    let bound = tol.bound_for(ref_max_abs);
    let acc = if reference.len() <= CHUNK {
        Accumulator::scan(reference, test, 0, bound)
    } else {
        let parts: Vec<Accumulator> = reference
            .par_chunks(CHUNK)
            .zip(test.par_chunks(CHUNK))
            .enumerate()
            .map(|(k, (r, t))| Accumulator::scan(r, t, k * CHUNK, bound))
            .collect();
        // `collect` keeps chunk order; merging left to right fixes the summation order.
        parts
            .iter()
            .fold(Accumulator::new(), |acc, part| acc.merge(part))
    };
    (ref_max_abs, acc)
}

/// Row-major multi-index of flat index `flat` in `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for (slot, &dim) in index.iter_mut().zip(shape.iter()).rev() {
        *slot = flat % dim;
        flat /= dim;
    }
    index
}

/// Compares `test` against `reference` element by element, in f64.
///
/// An element pair passes when `|t - r|` is within `tol.bound_for(ref_max_abs)` (see there:
/// `atol * max(1, ref_max_abs) + rtol * |r|`). Tolerances should be finite and non-negative
/// (`TolerancePolicy` checks this); a NaN bound fails every element.
///
/// Non-finite values are counted per side and kept out of the numeric statistics. Two NaNs or
/// the same infinity on both sides agree; any other pair with a NaN or infinity is a mismatch
/// and counts in `nonfinite_mismatch`.
///
/// The dtypes may differ (an fp16 export against an fp32 reference); integer and bool tensors
/// are widened and go through the same code (integers beyond 2^53 lose precision in f64).
/// The shapes must be equal: a reshaped or transposed tensor with the same element count is
/// not comparable element by element, so it is a `ShapeMismatch` rather than a silent
/// comparison of unrelated elements. Likewise if a tensor's data length disagrees with its
/// shape.
pub fn compare(
    reference: &HostTensor,
    test: &HostTensor,
    tol: Tolerance,
) -> Result<ErrorStats, ShapeMismatch> {
    let expected: usize = reference.shape.iter().product();
    if reference.shape != test.shape || reference.numel() != expected || test.numel() != expected {
        return Err(ShapeMismatch {
            reference_shape: reference.shape.clone(),
            reference_numel: reference.numel(),
            test_shape: test.shape.clone(),
            test_numel: test.numel(),
        });
    }
    let numel = expected;

    // The dtype pair is matched here, once; the loops below are monomorphic.
    let (ref_max_abs, acc) = with_data!(&reference.data, r => {
        with_data!(&test.data, t => compare_slices(r.as_slice(), t.as_slice(), tol))
    });

    let found_max = acc.max_abs >= 0.0;
    let max_abs = if found_max { acc.max_abs } else { 0.0 };
    let max_abs_index = if found_max {
        unravel(acc.max_abs_at, &reference.shape)
    } else {
        Vec::new()
    };
    let (mean_abs, rmse) = if acc.finite_pairs > 0 {
        let n = acc.finite_pairs as f64;
        (acc.sum_abs / n, (acc.sum_err_sq / n).sqrt())
    } else {
        (0.0, 0.0)
    };
    let rel_to_range = if ref_max_abs > 0.0 {
        max_abs / ref_max_abs
    } else if max_abs > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let cosine = cosine(acc.sum_dot, acc.sum_ref_sq, acc.sum_test_sq);
    let snr_db = if acc.sum_err_sq == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (acc.sum_ref_sq / acc.sum_err_sq).log10()
    };
    let mismatch_ratio = if numel > 0 {
        acc.mismatches as f64 / numel as f64
    } else {
        0.0
    };

    Ok(ErrorStats {
        numel,
        max_abs,
        max_abs_index,
        mean_abs,
        rmse,
        max_rel: acc.max_rel,
        rel_to_range,
        ref_max_abs,
        cosine,
        snr_db,
        mismatches: acc.mismatches,
        mismatch_ratio,
        nan_ref: acc.nan_ref,
        nan_test: acc.nan_test,
        inf_ref: acc.inf_ref,
        inf_test: acc.inf_test,
        nonfinite_mismatch: acc.nonfinite_mismatch,
        tol,
        required_atol: max_abs / ref_max_abs.max(1.0),
        required_rtol: acc.required_rtol,
        pass: acc.mismatches == 0,
        histogram: Histogram {
            bins: acc.histogram().to_vec(),
        },
    })
}

/// Cosine similarity from the sums; conventions for all-zero sides as documented on
/// `ErrorStats::cosine`.
fn cosine(dot: f64, ref_sq: f64, test_sq: f64) -> f64 {
    match (ref_sq == 0.0, test_sq == 0.0) {
        (true, true) => 1.0,
        (true, false) | (false, true) => 0.0,
        (false, false) => {
            // sqrt(a * b) is exact for identical sides (sqrt(a*a) == a), so identical tensors
            // give exactly 1; fall back to the product of roots if a * b overflows.
            let product = ref_sq * test_sq;
            let norm = if product.is_finite() {
                product.sqrt()
            } else {
                ref_sq.sqrt() * test_sq.sqrt()
            };
            // Rounding can push the ratio a hair past 1.
            (dot / norm).clamp(-1.0, 1.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::tensor::DType;

    fn f64t(shape: Vec<usize>, v: Vec<f64>) -> HostTensor {
        HostTensor::new(shape, TensorData::F64(v))
    }

    fn tol(atol: f64, rtol: f64) -> Tolerance {
        Tolerance { atol, rtol }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn hand_computed_values() {
        let r = HostTensor::f32(vec![4], vec![1.0, 2.0, 3.0, 4.0]);
        let t = HostTensor::f32(vec![4], vec![1.0, 2.0, 3.0, 5.0]);
        let s = compare(&r, &t, Tolerance::default_for(DType::F32)).unwrap();
        assert_eq!(s.numel, 4);
        assert_eq!(s.max_abs, 1.0);
        assert_eq!(s.max_abs_index, vec![3]);
        assert_eq!(s.mean_abs, 0.25);
        assert_eq!(s.rmse, 0.5);
        assert_eq!(s.max_rel, 0.25);
        assert_eq!(s.rel_to_range, 0.25);
        assert_eq!(s.ref_max_abs, 4.0);
        // dot = 1+4+9+20 = 34, |r|^2 = 30, |t|^2 = 1+4+9+25 = 39.
        assert!(
            close(s.cosine, 34.0 / (30.0_f64 * 39.0).sqrt()),
            "{}",
            s.cosine
        );
        assert!(close(s.snr_db, 10.0 * 30.0_f64.log10()), "{}", s.snr_db);
        // Bound: 1e-4 * 4 + 1e-3 * |r|; only the last element breaks it.
        assert_eq!(s.mismatches, 1);
        assert_eq!(s.mismatch_ratio, 0.25);
        assert_eq!(s.nonfinite_mismatch, 0);
        assert!(!s.pass);
        assert_eq!(s.histogram.total(), 4);
        assert_eq!(s.histogram.bins[0], 3);
        assert_eq!(s.histogram.bins[bin_of(1.0)], 1);
    }

    #[test]
    fn identical_tensors() {
        let v: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.37).sin() * 10.0).collect();
        let r = HostTensor::f32(vec![10, 100], v.clone());
        let s = compare(&r, &r.clone(), tol(0.0, 0.0)).unwrap();
        assert_eq!(s.max_abs, 0.0);
        assert_eq!(s.max_abs_index, vec![0, 0]);
        assert_eq!(s.mean_abs, 0.0);
        assert_eq!(s.rmse, 0.0);
        assert_eq!(s.max_rel, 0.0);
        assert_eq!(s.rel_to_range, 0.0);
        assert_eq!(s.cosine, 1.0);
        assert_eq!(s.snr_db, f64::INFINITY);
        assert_eq!(s.mismatches, 0);
        assert!(s.pass);
        assert_eq!(s.histogram.bins[0], 1000);
    }

    #[test]
    fn empty_tensors() {
        let r = HostTensor::f32(vec![0, 3], vec![]);
        let s = compare(&r, &r.clone(), Tolerance::default_for(DType::F32)).unwrap();
        assert_eq!(s.numel, 0);
        assert_eq!(s.max_abs, 0.0);
        assert!(s.max_abs_index.is_empty());
        assert_eq!(
            (s.mean_abs, s.rmse, s.max_rel, s.rel_to_range),
            (0.0, 0.0, 0.0, 0.0)
        );
        assert_eq!(s.cosine, 1.0);
        assert_eq!(s.snr_db, f64::INFINITY);
        assert_eq!((s.mismatches, s.mismatch_ratio), (0, 0.0));
        assert_eq!(s.histogram, Histogram::default());
    }

    #[test]
    fn all_zero_sides() {
        let z = f64t(vec![3], vec![0.0, 0.0, 0.0]);
        let nz = f64t(vec![3], vec![0.0, 2.0, 0.0]);
        let s = compare(&z, &z, tol(0.0, 0.0)).unwrap();
        assert_eq!((s.cosine, s.rel_to_range), (1.0, 0.0));
        let s = compare(&z, &nz, tol(0.0, 0.0)).unwrap();
        assert_eq!(s.cosine, 0.0);
        assert_eq!(s.rel_to_range, f64::INFINITY);
        assert_eq!(s.snr_db, f64::NEG_INFINITY);
        assert_eq!(s.max_rel, 0.0, "no reference element is non-zero");
        let s = compare(&nz, &z, tol(0.0, 0.0)).unwrap();
        assert_eq!(s.cosine, 0.0);
        assert_eq!(s.rel_to_range, 1.0);
        assert_eq!(s.max_rel, 1.0);
    }

    #[test]
    fn nan_and_inf_counted_per_side_and_pattern_mismatch_detected() {
        let (nan, inf) = (f64::NAN, f64::INFINITY);
        let r = f64t(vec![7], vec![nan, inf, -inf, 1.0, nan, 2.0, 5.0]);
        let t = f64t(vec![7], vec![nan, inf, inf, nan, 3.0, 2.0, inf]);
        let s = compare(&r, &t, tol(0.0, 0.0)).unwrap();
        assert_eq!((s.nan_ref, s.nan_test), (2, 2));
        assert_eq!((s.inf_ref, s.inf_test), (2, 3));
        // (-inf, inf), (1, NaN), (NaN, 3), (5, inf) differ; (NaN, NaN) and (inf, inf) agree.
        assert_eq!(s.nonfinite_mismatch, 4);
        assert_eq!(s.mismatches, 4);
        // Only (2, 2) is a finite pair.
        assert_eq!(s.max_abs, 0.0);
        assert_eq!(s.max_abs_index, vec![5]);
        assert_eq!(s.ref_max_abs, 5.0, "finite reference values only");
        assert_eq!(s.histogram.total(), 1);
        assert_eq!(s.cosine, 1.0);
        assert!(s.mean_abs.is_finite() && s.rmse.is_finite());

        // Matching non-finite patterns are not mismatches.
        let s = compare(&r, &r.clone(), tol(0.0, 0.0)).unwrap();
        assert_eq!((s.mismatches, s.nonfinite_mismatch), (0, 0));
        assert_eq!((s.nan_ref, s.nan_test, s.inf_ref, s.inf_test), (2, 2, 2, 2));
    }

    #[test]
    fn all_nonfinite_has_no_worst_element() {
        let r = f64t(vec![2], vec![f64::NAN, f64::INFINITY]);
        let s = compare(&r, &r.clone(), tol(0.0, 0.0)).unwrap();
        assert!(s.max_abs_index.is_empty());
        assert_eq!(s.max_abs, 0.0);
        assert_eq!(s.mismatches, 0);
    }

    #[test]
    fn multi_index_of_max_in_2x3() {
        let r = f64t(vec![2, 3], vec![0.0; 6]);
        let t = f64t(vec![2, 3], vec![0.1, -0.2, 0.0, 0.3, -0.9, 0.5]);
        let s = compare(&r, &t, tol(0.0, 0.0)).unwrap();
        assert_eq!(s.max_abs, 0.9);
        assert_eq!(s.max_abs_index, vec![1, 1]);
        // Ties go to the first element in row-major order.
        let t = f64t(vec![2, 3], vec![0.0, 0.0, 0.7, -0.7, 0.0, 0.7]);
        let s = compare(&r, &t, tol(0.0, 0.0)).unwrap();
        assert_eq!(s.max_abs_index, vec![0, 2]);
        // A scalar has an empty multi-index.
        let s = compare(
            &f64t(vec![], vec![1.0]),
            &f64t(vec![], vec![2.0]),
            tol(0.0, 0.0),
        )
        .unwrap();
        assert_eq!((s.max_abs, s.max_abs_index.len()), (1.0, 0));
    }

    #[test]
    fn fp16_test_against_f32_reference() {
        let values = [0.1_f32, -1.7, 2.71, 1000.3, 0.0];
        let r = HostTensor::f32(vec![5], values.to_vec());
        let t = HostTensor::new(
            vec![5],
            TensorData::F16(values.iter().map(|&v| f16::from_f32(v)).collect()),
        );
        let worst = values
            .iter()
            .map(|&v| (f16::from_f32(v).to_f64() - v as f64).abs())
            .fold(0.0, f64::max);
        let s = compare(&r, &t, Tolerance::default_for(DType::F16)).unwrap();
        assert_eq!(s.max_abs, worst);
        assert!(worst > 0.0);
        assert_eq!(
            s.mismatches, 0,
            "fp16 rounding is within the fp16 tolerance"
        );
        // Held to exactness the rounding shows up.
        let s = compare(&r, &t, tol(0.0, 0.0)).unwrap();
        assert!(s.mismatches >= 3);
        // fp16 overflow: 70000 becomes +inf in fp16, a non-finite mismatch.
        let r = HostTensor::f32(vec![1], vec![70000.0]);
        let t = HostTensor::new(vec![1], TensorData::F16(vec![f16::from_f32(70000.0)]));
        let s = compare(&r, &t, Tolerance::default_for(DType::F16)).unwrap();
        assert_eq!((s.inf_test, s.nonfinite_mismatch, s.mismatches), (1, 1, 1));
        // bf16 on the other side works too.
        let t = HostTensor::new(vec![1], TensorData::Bf16(vec![bf16::from_f32(70000.0)]));
        let s = compare(&r, &t, Tolerance::default_for(DType::Bf16)).unwrap();
        assert_eq!(s.mismatches, 0);
    }

    #[test]
    fn integer_and_bool_tensors_exact() {
        let r = HostTensor::new(vec![4], TensorData::I64(vec![1, 2, 3, -4]));
        let same = HostTensor::new(vec![4], TensorData::I32(vec![1, 2, 3, -4]));
        let off = HostTensor::new(vec![4], TensorData::I64(vec![1, 2, 4, -4]));
        let exact = Tolerance::default_for(DType::I64);
        let s = compare(&r, &same, exact).unwrap();
        assert_eq!((s.mismatches, s.max_abs), (0, 0.0));
        let s = compare(&r, &off, exact).unwrap();
        assert_eq!(s.mismatches, 1);
        assert_eq!(s.max_abs_index, vec![2]);

        let b = HostTensor::new(vec![3], TensorData::Bool(vec![true, false, true]));
        let c = HostTensor::new(vec![3], TensorData::Bool(vec![true, true, true]));
        let s = compare(&b, &c, Tolerance::default_for(DType::Bool)).unwrap();
        assert_eq!(
            (s.mismatches, s.max_abs, s.max_abs_index.clone()),
            (1, 1.0, vec![1])
        );
        let u = HostTensor::new(vec![3], TensorData::U8(vec![1, 0, 1]));
        let s = compare(&b, &u, Tolerance::default_for(DType::Bool)).unwrap();
        assert!(s.pass);
    }

    #[test]
    fn bound_scales_atol_with_reference_magnitude() {
        // max|ref| = 100, atol 1e-4 -> bound 1e-2 for near-zero elements.
        let r = f64t(vec![3], vec![100.0, 0.0, 0.0]);
        let t = f64t(vec![3], vec![100.0, 0.0099, 0.0101]);
        let s = compare(&r, &t, tol(1e-4, 0.0)).unwrap();
        assert_eq!(s.mismatches, 1);
        assert_eq!(s.max_abs_index, vec![2]);
        // Below magnitude 1 the scale stays 1: bound is atol itself.
        let r = f64t(vec![3], vec![0.5, 0.0, 0.0]);
        let t = f64t(vec![3], vec![0.5, 0.99e-4, 1.01e-4]);
        let s = compare(&r, &t, tol(1e-4, 0.0)).unwrap();
        assert_eq!(s.mismatches, 1);
        // rtol adds per element: |r| = 50, rtol 1e-2 -> +0.5 on top of 1e-4 * 100.
        let r = f64t(vec![2], vec![100.0, 50.0]);
        let t = f64t(vec![2], vec![100.0, 50.509]);
        assert_eq!(compare(&r, &t, tol(1e-4, 1e-2)).unwrap().mismatches, 0);
        let t = f64t(vec![2], vec![100.0, 50.511]);
        assert_eq!(compare(&r, &t, tol(1e-4, 1e-2)).unwrap().mismatches, 1);
    }

    #[test]
    fn overflowing_difference_is_an_infinite_error_not_a_nonfinite_value() {
        let r = f64t(vec![2], vec![-1e308, 0.0]);
        let t = f64t(vec![2], vec![1e308, 0.0]);
        let s = compare(&r, &t, tol(1e-4, 1e-3)).unwrap();
        assert_eq!(s.max_abs, f64::INFINITY);
        assert_eq!(s.max_abs_index, vec![0]);
        assert_eq!((s.mismatches, s.nonfinite_mismatch), (1, 0));
        assert_eq!((s.inf_ref, s.inf_test), (0, 0));
        assert_eq!(s.histogram.bins[N_BINS - 1], 1);
    }

    #[test]
    fn mismatch_ratio() {
        let r = f64t(vec![8], vec![1.0; 8]);
        let t = f64t(vec![8], vec![1.0, 2.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0]);
        let s = compare(&r, &t, tol(1e-3, 0.0)).unwrap();
        assert_eq!((s.mismatches, s.mismatch_ratio), (2, 0.25));
    }

    #[test]
    fn histogram_bin_placement_and_edges() {
        let errors = [0.0, 5e-13, 1e-12, 3e-5, 1e-4, 0.5, 50.0, 100.0, 1e300];
        let r = f64t(vec![errors.len()], vec![0.0; errors.len()]);
        let t = f64t(vec![errors.len()], errors.to_vec());
        let s = compare(&r, &t, tol(0.0, 0.0)).unwrap();
        let mut expected = vec![0u64; N_BINS];
        expected[0] += 1; // 0
        expected[1] += 1; // 5e-13 < 1e-12
        expected[2] += 1; // [1e-12, 1e-11)
        expected[9] += 1; // 3e-5 in [1e-5, 1e-4)
        expected[10] += 1; // 1e-4 is a lower edge: [1e-4, 1e-3)
        expected[13] += 1; // 0.5 in [1e-1, 1)
        expected[15] += 1; // 50 in [1e1, 1e2)
        expected[16] += 2; // 100 and 1e300 in [1e2, inf)
        assert_eq!(s.histogram.bins, expected);

        let edges = Histogram::edges();
        assert_eq!(edges.len(), N_BINS + 1);
        assert_eq!(&edges[..3], &[0.0, 0.0, 1e-12]);
        assert_eq!(edges[N_BINS - 1], 1e2);
        assert_eq!(edges[N_BINS], f64::INFINITY);
        // Every decade value lands in the bin whose lower edge it is.
        for (i, &e) in edges.iter().enumerate().take(N_BINS).skip(2) {
            assert_eq!(bin_of(e), i, "edge {e}");
        }
        let labels = Histogram::labels();
        assert_eq!(labels.len(), N_BINS);
        assert_eq!(labels[0], "0");
        assert_eq!(labels[1], "(0, 1e-12)");
        assert_eq!(labels[2], "[1e-12, 1e-11)");
        assert_eq!(labels[N_BINS - 1], "[1e2, inf)");
    }

    #[test]
    fn shape_mismatch_is_an_error() {
        let a = HostTensor::f32(vec![2, 3], vec![0.0; 6]);
        let b = HostTensor::f32(vec![3, 2], vec![0.0; 6]);
        let c = HostTensor::f32(vec![4], vec![0.0; 4]);
        let err = compare(&a, &b, tol(0.0, 0.0)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "shape mismatch: reference is 2x3 (6 elements), test is 3x2 (6 elements)"
        );
        assert!(compare(&a, &c, tol(0.0, 0.0)).is_err());
        // Data that disagrees with its own shape is refused, not sliced.
        let bad = HostTensor {
            shape: vec![2, 3],
            data: TensorData::F32(vec![0.0; 5]),
        };
        assert!(compare(&a, &bad, tol(0.0, 0.0)).is_err());
    }

    #[test]
    fn serialises() {
        let r = HostTensor::f32(vec![2], vec![1.0, 2.0]);
        let s = compare(&r, &r.clone(), tol(0.0, 0.0)).unwrap();
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["max_abs_index"], serde_json::json!([0]));
        assert_eq!(json["histogram"].as_array().unwrap().len(), N_BINS);
        // Under the report's names, non-finite numbers as null, internals left out.
        assert_eq!(json["nan_torch"], 0);
        assert_eq!(json["snr_db"], serde_json::Value::Null);
        assert_eq!(
            (json["atol"].as_f64(), json["pass"].as_bool()),
            (Some(0.0), Some(true))
        );
        assert!(json.get("mismatches").is_none() && json.get("nan_ref").is_none());
    }

    /// Deterministic pseudo-random numbers (xorshift64*), so the big tests need no `rand`.
    fn noise(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                let u = x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
                u as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            })
            .collect()
    }

    /// A large f32 reference / f16-ish perturbed f32 test pair with a few non-finite values.
    fn big_pair(n: usize) -> (HostTensor, HostTensor) {
        let base = noise(n, 0x9e37_79b9_7f4a_7c15);
        let jitter = noise(n, 0xdead_beef_cafe_f00d);
        let mut r: Vec<f32> = base.iter().map(|&v| (v * 30.0) as f32).collect();
        let mut t: Vec<f32> = r
            .iter()
            .zip(&jitter)
            .map(|(&v, &j)| v + (j * j * j * 1e-2) as f32)
            .collect();
        r[17] = f32::NAN;
        t[17] = f32::NAN;
        r[n / 2] = f32::INFINITY;
        t[n / 2 + 1] = f32::NEG_INFINITY;
        t[n - 3] = f32::NAN;
        // A unique, clearly worst element in a late chunk.
        t[n - 100] = r[n - 100] + 5.0;
        (
            HostTensor::f32(vec![n / 1000, 1000], r),
            HostTensor::f32(vec![n / 1000, 1000], t),
        )
    }

    /// The definition, written as plainly as possible: one sequential loop, no chunks.
    // Over 80 lines on purpose: the reference the chunked statistics are checked against
    // reads top to bottom as the definitions do; split into helpers it would share their
    // structure, and with it their mistakes.
    fn naive(r: &HostTensor, t: &HostTensor, tol: Tolerance) -> ErrorStats {
        let n = r.numel();
        let rv = r.data.to_f64_vec();
        let tv = t.data.to_f64_vec();
        let ref_max = rv
            .iter()
            .filter(|v| v.is_finite())
            .fold(0.0_f64, |m, v| m.max(v.abs()));
        let scale = ref_max.max(1.0);
        let mut s = ErrorStats {
            numel: n,
            max_abs: 0.0,
            max_abs_index: vec![],
            mean_abs: 0.0,
            rmse: 0.0,
            max_rel: 0.0,
            rel_to_range: 0.0,
            ref_max_abs: ref_max,
            cosine: 0.0,
            snr_db: 0.0,
            mismatches: 0,
            mismatch_ratio: 0.0,
            nan_ref: 0,
            nan_test: 0,
            inf_ref: 0,
            inf_test: 0,
            nonfinite_mismatch: 0,
            tol,
            required_atol: 0.0,
            required_rtol: 0.0,
            pass: false,
            histogram: Histogram::default(),
        };
        let (mut cnt, mut sa, mut se, mut srr, mut stt, mut srt) =
            (0usize, 0.0, 0.0, 0.0, 0.0, 0.0);
        let mut best: Option<usize> = None;
        for i in 0..n {
            let (a, b) = (rv[i], tv[i]);
            s.nan_ref += a.is_nan() as usize;
            s.nan_test += b.is_nan() as usize;
            s.inf_ref += a.is_infinite() as usize;
            s.inf_test += b.is_infinite() as usize;
            if a.is_finite() && b.is_finite() {
                let e = (b - a).abs();
                cnt += 1;
                sa += e;
                se += e * e;
                srr += a * a;
                stt += b * b;
                srt += a * b;
                if best.is_none() || e > s.max_abs {
                    s.max_abs = e;
                    best = Some(i);
                }
                if a.abs() > f64::MIN_POSITIVE {
                    s.max_rel = s.max_rel.max(e / a.abs());
                }
                if e > tol.atol * scale + tol.rtol * a.abs() {
                    s.mismatches += 1;
                }
                if e > tol.atol * scale {
                    let need = if a.abs() > f64::MIN_POSITIVE {
                        (e - tol.atol * scale) / a.abs()
                    } else {
                        f64::INFINITY
                    };
                    s.required_rtol = s.required_rtol.max(need);
                }
                s.histogram.bins[bin_of(e)] += 1;
            } else if !(a.is_nan() && b.is_nan() || a == b) {
                s.mismatches += 1;
                s.nonfinite_mismatch += 1;
            }
        }
        s.max_abs_index = best.map(|i| unravel(i, &r.shape)).unwrap_or_default();
        s.mean_abs = sa / cnt as f64;
        s.rmse = (se / cnt as f64).sqrt();
        s.rel_to_range = s.max_abs / ref_max;
        s.required_atol = s.max_abs / scale;
        s.cosine = srt / (srr.sqrt() * stt.sqrt());
        s.snr_db = 10.0 * (srr / se).log10();
        s.mismatch_ratio = s.mismatches as f64 / n as f64;
        s.pass = s.mismatches == 0;
        s
    }

    #[test]
    fn parallel_path_matches_naive_definition_on_1m_elements() {
        let n = 1_000_000;
        let (r, t) = big_pair(n);
        let tol = Tolerance::default_for(DType::F32);
        let got = compare(&r, &t, tol).unwrap();
        let want = naive(&r, &t, tol);
        // Exact for everything that is not a long floating-point sum.
        assert_eq!(got.numel, want.numel);
        assert_eq!(got.max_abs, want.max_abs);
        assert_eq!(got.max_abs_index, want.max_abs_index);
        assert_eq!(got.max_abs_index, vec![(n - 100) / 1000, 900]);
        assert_eq!(got.max_rel, want.max_rel);
        assert_eq!(got.required_atol, want.required_atol);
        assert_eq!(got.required_rtol, want.required_rtol);
        assert_eq!(got.rel_to_range, want.rel_to_range);
        assert_eq!(got.ref_max_abs, want.ref_max_abs);
        assert_eq!(got.mismatches, want.mismatches);
        assert_eq!(got.mismatch_ratio, want.mismatch_ratio);
        assert_eq!(
            (got.nan_ref, got.nan_test, got.inf_ref, got.inf_test),
            (want.nan_ref, want.nan_test, want.inf_ref, want.inf_test)
        );
        assert_eq!(
            (got.nan_ref, got.nan_test, got.inf_ref, got.inf_test),
            (1, 2, 1, 1)
        );
        assert_eq!(got.nonfinite_mismatch, want.nonfinite_mismatch);
        assert_eq!(got.nonfinite_mismatch, 3);
        assert_eq!(got.histogram, want.histogram);
        assert!(
            got.mismatches > got.nonfinite_mismatch,
            "the test should exercise the bound"
        );
        // Sums differ only by summation order.
        for (name, a, b) in [
            ("mean_abs", got.mean_abs, want.mean_abs),
            ("rmse", got.rmse, want.rmse),
            ("cosine", got.cosine, want.cosine),
            ("snr_db", got.snr_db, want.snr_db),
        ] {
            assert!((a - b).abs() <= 1e-9 * b.abs(), "{name}: {a} vs {b}");
        }
    }

    /// Every number an accumulator holds, f64s as bits, the histogram as bins.
    fn bits(a: &Accumulator) -> Vec<u64> {
        let mut v = vec![
            a.finite_pairs as u64,
            a.max_abs.to_bits(),
            a.max_abs_at as u64,
            a.sum_abs.to_bits(),
            a.sum_err_sq.to_bits(),
            a.sum_ref_sq.to_bits(),
            a.sum_test_sq.to_bits(),
            a.sum_dot.to_bits(),
            a.max_rel.to_bits(),
            a.required_rtol.to_bits(),
            a.mismatches as u64,
            a.nan_ref as u64,
            a.nan_test as u64,
            a.inf_ref as u64,
            a.inf_test as u64,
            a.nonfinite_mismatch as u64,
        ];
        v.extend(a.histogram());
        v
    }

    #[test]
    fn the_exponent_table_bins_as_the_search_does() {
        let mut values = vec![0.0, 5e-324, f64::MIN_POSITIVE, f64::MAX, f64::INFINITY];
        for &edge in &DECADE_EDGES {
            values.extend([
                edge,
                edge.next_up(),
                edge.next_down(),
                edge * 1.5,
                edge * 0.7,
            ]);
        }
        for exponent in -1074..=1023 {
            let p = 2f64.powi(exponent);
            values.extend([p, p.next_up(), p.next_down(), p * 1.3]);
        }
        values.extend(noise(100_000, 5).iter().map(|v| 10f64.powf(v * 20.0 - 2.0)));
        for v in values.into_iter().filter(|v| *v >= 0.0) {
            assert_eq!(bin_by_exponent(v), bin_of(v), "{v:e}");
        }
    }

    #[test]
    fn blocks_give_the_element_by_element_result_bit_for_bit() {
        // Not a multiple of the block; errors that grow along the tensor (the largest
        // relative error keeps moving, block after block), a subnormal reference, a tie for
        // the largest error inside one block, errors exactly 0 and exactly on a decade edge,
        // failing elements, NaN and infinities in some blocks, an overflowing difference.
        let n = BLOCK * 40 + 7;
        let base = noise(n, 7);
        let jitter = noise(n, 11);
        let mut r: Vec<f64> = base.iter().map(|v| v * 8.0).collect();
        let mut t: Vec<f64> = r
            .iter()
            .zip(&jitter)
            .enumerate()
            .map(|(i, (&v, &j))| v + j * 1e-6 * (1.0 + i as f64 / 10.0))
            .collect();
        r[33] = 1e-310;
        (r[100], t[100], r[103], t[103]) = (1.0, 1.5e3, -2.0, 1.5e3 - 3.0);
        (r[200], t[200]) = (0.0, 1e-3);
        t[300] = r[300];
        t[410] = f64::NAN;
        (r[500], t[500]) = (f64::INFINITY, f64::INFINITY);
        (r[600], t[600]) = (1e308, -1e308);
        r[n - 2] = f64::NEG_INFINITY;
        let bound = tol(1e-5, 1e-4).bound_for(8.0);
        let blocked = Accumulator::scan(&r, &t, 3, bound);
        let mut single = Accumulator::new();
        for (i, (&a, &b)) in r.iter().zip(&t).enumerate() {
            single.one(a, b, 3 + i, bound);
        }
        assert_eq!(bits(&blocked), bits(&single));
        assert!(blocked.block_bins.iter().flatten().sum::<u64>() > 0 && blocked.mismatches > 0);
        assert_eq!(
            blocked.max_abs_at,
            3 + 600,
            "the overflow is the largest error"
        );
        // f32 data through the same path.
        let r32: Vec<f32> = r.iter().map(|&v| v as f32).collect();
        let t32: Vec<f32> = t.iter().map(|&v| v as f32).collect();
        let blocked = Accumulator::scan(&r32, &t32, 0, bound);
        let mut single = Accumulator::new();
        for (i, (&a, &b)) in r32.iter().zip(&t32).enumerate() {
            single.one(a.widen(), b.widen(), i, bound);
        }
        assert_eq!(bits(&blocked), bits(&single));
    }

    #[test]
    fn the_required_tolerance_is_the_smallest_that_passes() {
        let r = f64t(vec![4], vec![10.0, -4.0, 0.5, 2.0]);
        let t = f64t(vec![4], vec![10.02, -4.0, 0.5001, 2.03]);
        let s = compare(&r, &t, tol(1e-3, 0.0)).unwrap();
        // rtol 0: the largest error (0.03 at 2.0) over the scale max(1, 10).
        assert!(
            (s.required_atol - 0.003).abs() < 1e-12,
            "{}",
            s.required_atol
        );
        // At atol 1e-3 (scaled to 1e-2): the element at 2.0 needs (0.03 - 0.01) / 2.
        assert!(
            (s.required_rtol - 0.01).abs() < 1e-12,
            "{}",
            s.required_rtol
        );
        let just = |atol: f64, rtol: f64| compare(&r, &t, tol(atol, rtol)).unwrap().pass;
        assert!(just(s.required_atol * 1.000001, 0.0));
        assert!(!just(s.required_atol * 0.99, 0.0));
        assert!(just(1e-3, s.required_rtol * 1.000001));
        assert!(!just(1e-3, s.required_rtol * 0.99));
        // An element whose reference is 0 beyond the absolute part needs an infinite rtol.
        let z = compare(
            &f64t(vec![2], vec![0.0, 1.0]),
            &f64t(vec![2], vec![0.1, 1.0]),
            tol(1e-3, 0.0),
        )
        .unwrap();
        assert!(z.required_rtol.is_infinite());
    }

    #[test]
    fn deterministic_across_thread_pools() {
        let (r, t) = big_pair(1_000_000);
        let tol = Tolerance::default_for(DType::F32);
        let run = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| compare(&r, &t, tol).unwrap())
        };
        let one = run(1);
        let four = run(4);
        // Bit-identical, sums included (no NaN fields here, so == is exact equality).
        assert_eq!(one, four);
        assert_eq!(one.mean_abs.to_bits(), four.mean_abs.to_bits());
        assert_eq!(one, compare(&r, &t, tol).unwrap());
    }

    #[test]
    fn chunk_boundary_sizes() {
        // Just below, at and just above the parallel threshold, and a ragged last chunk.
        for n in [CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7] {
            let rv = noise(n, n as u64 + 1);
            let r = f64t(vec![n], rv.clone());
            let mut tv = rv;
            tv[n - 1] += 1.0;
            let s = compare(&r, &f64t(vec![n], tv), tol(1e-6, 0.0)).unwrap();
            assert_eq!(
                (s.mismatches, s.max_abs_index.clone()),
                (1, vec![n - 1]),
                "n = {n}"
            );
            assert_eq!(s.histogram.total(), n as u64);
        }
    }
}
