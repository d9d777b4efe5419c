//! The families of ops, and sets of them.
//!
//! A family is what an op computes, whatever each side calls it: an aten op and an ONNX op are
//! compatible when their families meet. A set is a bit mask, copied, compared and intersected
//! without allocating: pairing asks it of many candidate pairs.

/// What an op computes, for pairing purposes (`table::ROWS` gives each op its families).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Conv,
    Norm,
    /// The ops a decomposition may end in (a GELU's Mul, a Linear's bias Add, a LayerNorm's
    /// last Add).
    Arith,
    MatMul,
    Relu,
    Activation,
    Softmax,
    Add,
    Mul,
    Where,
    Pool,
    Reduce,
    Resize,
    Concat,
    GridSample,
    Compare,
    ArgReduce,
    /// Ops that move, select or repeat elements and compute none.
    Layout,
}

/// A set of families.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Families(u32);

impl Families {
    /// No family: an op the table does not list.
    pub const NONE: Families = Families(0);

    pub const fn of(families: &[Family]) -> Families {
        let mut bits = 0;
        let mut i = 0;
        while i < families.len() {
            bits |= 1 << families[i] as u32;
            i += 1;
        }
        Families(bits)
    }

    pub fn contains(self, family: Family) -> bool {
        self.0 & (1 << family as u32) != 0
    }

    /// Whether the two sets share a family.
    pub fn meets(self, other: Families) -> bool {
        self.0 & other.0 != 0
    }

    /// Whether `family` is the set's only family (a layout op, not a `roll` that also
    /// concatenates).
    pub fn is_only(self, family: Family) -> bool {
        self == Families::of(&[family])
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_meet_when_they_share_a_family() {
        let norm = Families::of(&[Family::Norm, Family::Conv]);
        assert!(norm.contains(Family::Conv));
        assert!(!norm.contains(Family::Layout));
        assert!(norm.meets(Families::of(&[Family::Conv])));
        assert!(!norm.meets(Families::of(&[Family::Layout, Family::Arith])));
        assert!(!norm.meets(Families::NONE));
        assert!(Families::of(&[Family::Layout]).is_only(Family::Layout));
        assert!(!Families::of(&[Family::Layout, Family::Concat]).is_only(Family::Layout));
        assert!(Families::NONE.is_empty() && !norm.is_empty());
    }
}
